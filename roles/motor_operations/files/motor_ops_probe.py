"""KV-event and affinity probe of a deployed PyMotor job (run inside a prefill/union container:
`docker exec -i <container> python3 - '<json args>' < this file`; the PyMotor image has pyzmq and msgpack).

Subscribes to every KV-event publisher (ZMQ SUB, the 3-frame [topic, seq, msgpack] messages vLLM sends), then
sends N chat requests that share a long, fresh prefix and M unrelated ones to the coordinator, asks the KV
conductor's /query how much of the shared prompt it has indexed before and after each shared request, keeps
listening for the rest of `seconds`, and prints one JSON object:
  endpoints: {endpoint: {messages, batches, block_stored, decode_errors, shapes}}, shapes, seconds,
  shared / unrelated: [{status, target, instance, dp_rank}], longest_matched: [..] or null, tokenizer, error.
Read-only for the cluster apart from the probe requests themselves. Python 3.6+, stdlib + zmq + msgpack.
"""

import json
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

FILLER = ("Ascend 800I hosts run PyMotor with prefill and decode instances; the KV conductor indexes the "
          "blocks every prefill engine stores so that the coordinator can route a prompt to the engine that "
          "already holds its prefix. ")


def http(method, url, body=None, timeout=30):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            headers = {k.lower(): v for k, v in resp.headers.items()}
            return resp.status, (json.loads(raw.decode() or "null") if raw else None), headers
    except urllib.error.HTTPError as err:
        return err.code, None, {}
    except Exception as err:  # noqa: BLE001 (connection refused, timeout: report, not crash)
        return -1, str(err), {}


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


def load_tokenizer(model_path):
    """token ids of a chat as the engines see them: the model's tokenizer (real image), else the stand-in's."""
    try:
        from transformers import AutoTokenizer  # the real PyMotor / vLLM image

        tok = AutoTokenizer.from_pretrained(model_path, trust_remote_code=True)

        def encode(messages):
            ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            return [int(i) for i in (ids["input_ids"] if isinstance(ids, dict) else ids)]
        return "transformers", encode
    except Exception:  # noqa: BLE001
        pass
    try:
        from motor_sim.tokenizer import Tokenizer  # the stand-in image

        tok = Tokenizer(model_path)
        return "motor_sim", lambda messages: tok.encode(tok.render_chat(messages))
    except Exception:  # noqa: BLE001
        return None, None


def main():
    args = json.loads(sys.argv[1])
    out = {"endpoints": {}, "shapes": [], "shared": [], "unrelated": [], "longest_matched": None,
           "tokenizer": None, "error": None, "seconds": args.get("seconds", 5)}
    try:
        import msgpack
        import zmq
    except ImportError as err:
        out["error"] = f"pyzmq/msgpack missing in the container: {err}"
        print(json.dumps(out))
        return
    start = time.monotonic()
    listener = Listener(zmq, msgpack, args.get("endpoints", []))
    listener.start()
    time.sleep(float(args.get("settle", 1.0)))  # ZMQ slow joiner: let SUB connections complete

    nonce = uuid.uuid4().hex
    prefix = f"Verification probe {nonce}. " + FILLER * max(1, int(args.get("prefix_chars", 1200)) // len(FILLER))
    name, encode = load_tokenizer(args.get("model_path") or "")
    out["tokenizer"] = name
    url = args["coordinator_url"].rstrip("/") + "/v1/chat/completions"
    query_url = args.get("conductor_url")

    def longest(messages):
        if not (query_url and encode):
            return None
        body = {"model": args["model"], "block_size": int(args["block_size"]), "token_ids": encode(messages)}
        status, data, _headers = http("POST", query_url.rstrip("/") + "/query", body, timeout=5)
        if status != 200 or not isinstance(data, dict):
            return -1
        best = 0
        for per_instance in data.values():
            for hit in (per_instance or {}).values():
                best = max(best, int((hit or {}).get("longest_matched", 0)))
        return best

    def chat(system, user):
        body = {"model": args["model"], "max_tokens": int(args.get("max_tokens", 4)),
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        status, data, headers = http("POST", url, body, timeout=float(args.get("timeout", 60)))
        instance = headers.get("x-motor-prefill-instance")
        sim = (data or {}).get("motor_sim", {}) if isinstance(data, dict) else {}
        rank = sim.get("prefill_dp_rank")
        target = None if instance is None else (instance if rank is None else f"{instance}/dp{rank}")
        return {"status": status, "instance": instance, "dp_rank": rank, "target": target}

    first = [{"role": "system", "content": prefix}, {"role": "user", "content": "Question 0: what is stored?"}]
    series = [longest(first)]
    for i in range(int(args.get("shared", 4))):
        out["shared"].append(chat(prefix, f"Question {i}: what is stored?"))
        time.sleep(float(args.get("index_wait", 0.5)))  # events travel engine -> conductor
        series.append(longest(first))
    out["longest_matched"] = None if series[0] is None else series
    for i in range(int(args.get("unrelated", 2))):
        out["unrelated"].append(chat(f"Unrelated probe {uuid.uuid4().hex} number {i}.", "Say hello."))

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
