#!/usr/bin/env python3
"""Write Mooncake config files from user_config.json, like PyMotor's startup/mooncake_config.py.

  mooncake_config.py conductor <user_config> <out>  kv_conductor_config, plus for kvevent_instance
      entries the mooncake_master endpoint tcp://<KVP_MASTER_SERVICE>:<pool port> and modelname
      (kv_cache_pool_config and KVP_MASTER_SERVICE are then mandatory)
  mooncake_config.py pool <user_config> <out>       kv_cache_pool_config + master_server_address
"""

import json
import os
import sys


def fail(message: str) -> None:
    print(f"[mooncake_config] ERROR: {message}", file=sys.stderr)
    sys.exit(1)


def served_model_name(user_config: dict) -> str:
    for role in ("prefill", "union"):
        engine = (user_config.get(f"motor_engine_{role}_config") or {}).get("engine_config") or {}
        if engine:
            return engine.get("served_model_name") or engine.get("served-model-name") or ""
    return ""


def pool_port(user_config: dict) -> int:
    return int((user_config.get("kv_cache_pool_config") or {}).get("port") or 50088)


def conductor_config(user_config: dict) -> dict:
    config = json.loads(json.dumps(user_config.get("kv_conductor_config") or {}))
    instances = config.get("kvevent_instance") or {}
    if instances:
        master = os.environ.get("KVP_MASTER_SERVICE", "")
        if not user_config.get("kv_cache_pool_config") or not master:
            fail("kvevent_instance needs kv_cache_pool_config and KVP_MASTER_SERVICE")
        for entry in instances.values():
            entry["endpoint"] = f"tcp://{master}:{pool_port(user_config)}"
            entry["modelname"] = served_model_name(user_config)
    return config


def pool_config(user_config: dict) -> dict:
    config = dict(user_config.get("kv_cache_pool_config") or {})
    config["master_server_address"] = f"{os.environ['KVP_MASTER_SERVICE']}:{pool_port(user_config)}"
    return config


def main(argv: list[str]) -> None:
    if len(argv) != 3 or argv[0] not in ("conductor", "pool"):
        fail("usage: mooncake_config.py conductor|pool <user_config.json> <out.json>")
    kind, src, out = argv
    with open(src, encoding="utf-8") as fh:
        user_config = json.load(fh)
    config = conductor_config(user_config) if kind == "conductor" else pool_config(user_config)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(config, fh, indent=2)
    print(f"[mooncake_config] wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
