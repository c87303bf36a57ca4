#!/usr/bin/env python3
"""Write Mooncake config files from user_config.json, like PyMotor's startup/mooncake_config.py.

  mooncake_config.py conductor <out> <user_config>  kv_conductor_config, plus for kvevent_instance
      entries the mooncake_master endpoint tcp://<KVP_MASTER_SERVICE>:<pool port> and modelname
      (kv_cache_pool_config and KVP_MASTER_SERVICE are then mandatory; the model name comes from
      lib.utils, imported from two directories up or PYTHONPATH, as PyMotor's script does)
  mooncake_config.py pool <out> <user_config>       kv_cache_pool_config + master_server_address
Argument order and exit codes as PyMotor's: the output path comes first.
"""

import json
import os
import sys


def fail(message: str) -> None:
    print(f"[mooncake_config] ERROR: {message}", file=sys.stderr)
    sys.exit(1)


def served_model_name(user_config: dict) -> str:
    # PyMotor: sys.path gets dirname(dirname(__file__)) (the parent of the config dir, which has no lib/): the
    # import fails (ModuleNotFoundError, exit 1) unless PYTHONPATH leads to the image's deployer tree
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from lib.utils import resolve_model_name  # pylint: disable=import-outside-toplevel

    return resolve_model_name(user_config["motor_engine_prefill_config"])


def pool_port(user_config: dict) -> int:
    return int((user_config.get("kv_cache_pool_config") or {}).get("port") or 50088)


def conductor_config(user_config: dict):
    """The conductor config, or None when kvevent_instance is unset (PyMotor then writes no file at all)."""
    if not user_config.get("kv_conductor_config"):
        fail("KV cache conductor config not provided, skipping kv_conductor_config generation")
    config = json.loads(json.dumps(user_config["kv_conductor_config"]))
    if config.get("kvevent_instance") is None:
        print("[mooncake_config] KV cache conductor config kvevent_instance is None")
        return None
    master = os.environ.get("KVP_MASTER_SERVICE", "")
    if not user_config.get("kv_cache_pool_config") or not master:
        fail("kvevent_instance needs kv_cache_pool_config and KVP_MASTER_SERVICE")
    entry = config["kvevent_instance"]["mooncake_master"]  # PyMotor fills this entry only (KeyError otherwise)
    entry["endpoint"] = f"tcp://{master}:{pool_port(user_config)}"
    entry["modelname"] = served_model_name(user_config)
    return config


def pool_config(user_config: dict) -> dict:
    config = dict(user_config.get("kv_cache_pool_config") or {})
    config["master_server_address"] = f"{os.environ['KVP_MASTER_SERVICE']}:{pool_port(user_config)}"
    return config


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        print("Usage: python3 mooncake_config.py <pool|conductor> <output_config_path> <user_config_path>")
        sys.exit(1)
    kind, out, src = argv[:3]
    if kind not in ("conductor", "pool"):
        fail(f"Unknown config type: {kind}. Expected 'pool' or 'conductor'")
    if not os.path.exists(src):
        fail(f"user_config.json does not exist: {src}")
    with open(src, encoding="utf-8") as fh:
        user_config = json.load(fh)
    config = conductor_config(user_config) if kind == "conductor" else pool_config(user_config)
    if config is None:
        return
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(config, fh, indent=2)
    print(f"[mooncake_config] wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
