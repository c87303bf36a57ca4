"""vLLM's ZmqEventPublisher in miniature (vllm/distributed/kv_events.py, array-shaped era):
PUB bound on the kv-events endpoint port + dp_rank, replay ROUTER on replay port + dp_rank,
messages [topic, seq (8-byte big-endian), msgpack([ts, [["BlockStored", ...]], dp_rank])]."""

from __future__ import annotations

import collections
import hashlib
import re
import threading
import time

import msgpack
import zmq

from motor_sim.common import log

END_OF_REPLAY = (-1).to_bytes(8, "big", signed=True)


def offset_endpoint_port(endpoint: str, dp_rank: int) -> str:
    """tcp://*:5557 -> tcp://*:<5557+dp_rank>, like vLLM."""
    match = re.fullmatch(r"(.*):(\d+)", endpoint)
    if not match:
        raise ValueError(f"kv-events endpoint {endpoint!r} has no port")
    return f"{match.group(1)}:{int(match.group(2)) + dp_rank}"


def block_hash(parent: int | None, tokens: list[int]) -> int:
    """Like vLLM with int block hashes: the last 8 bytes of a sha256, big-endian. The top bit is
    forced so every hash is >= 2**32 and msgpack encodes it as uint64, as real hashes are."""
    digest = hashlib.sha256(repr((parent, tuple(tokens))).encode()).digest()
    return int.from_bytes(digest[-8:], "big") | (1 << 63)


class KvEventPublisher:
    def __init__(self, component: str, endpoint: str, replay_endpoint: str | None, topic: str, dp_rank: int,
                 buffer_steps: int = 10000):
        self.component, self.topic, self.dp_rank = component, topic.encode(), dp_rank
        self.ctx = zmq.Context()
        self.pub = self.ctx.socket(zmq.PUB)
        self.endpoint = offset_endpoint_port(endpoint, dp_rank)
        self.pub.bind(self.endpoint)
        self.lock = threading.Lock()  # zmq sockets are not thread-safe; requests come from many threads
        self.seq = 0
        self.buffer: collections.deque[tuple[int, bytes]] = collections.deque(maxlen=buffer_steps)
        self.replay_endpoint = offset_endpoint_port(replay_endpoint, dp_rank) if replay_endpoint else None
        if self.replay_endpoint:
            threading.Thread(target=self._serve_replay, daemon=True).start()
        log(component, "KV event publisher bound", endpoint=self.endpoint, replay_endpoint=self.replay_endpoint)

    def publish(self, events: list[list]) -> None:
        payload = msgpack.packb([time.time(), events, self.dp_rank], use_bin_type=True)
        with self.lock:
            seq = self.seq
            self.seq += 1
            self.buffer.append((seq, payload))
            self.pub.send_multipart([self.topic, seq.to_bytes(8, "big"), payload])
        log(self.component, "published KV events", seq=seq,
            events=[[e[0], len(e[1]) if len(e) > 1 else 0, e[6] if len(e) > 6 else None] for e in events])

    def _serve_replay(self) -> None:
        """vLLM's _service_replay: only the REQ envelope [client_id, b"", start_seq] is valid."""
        router = self.ctx.socket(zmq.ROUTER)
        router.bind(self.replay_endpoint)
        while True:
            frames = router.recv_multipart()
            if len(frames) != 3 or frames[1] != b"":
                log(self.component, "Invalid replay request", frames=len(frames))
                continue
            client, start = frames[0], int.from_bytes(frames[2], "big")
            with self.lock:
                pending = [(s, p) for s, p in self.buffer if s >= start]
            for seq, payload in pending:
                router.send_multipart([client, b"", seq.to_bytes(8, "big"), payload])
            router.send_multipart([client, b"", END_OF_REPLAY, b""])

