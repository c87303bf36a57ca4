#!/usr/bin/env python3
"""Write Mooncake config files from user_config.json, like PyMotor's startup/mooncake_config.py.

  mooncake_config.py conductor <out> <user_config>  kv_conductor_config, plus for kvevent_instance
      entries the mooncake_master endpoint tcp://<KVP_MASTER_SERVICE>:<pool port> and modelname
      (kv_cache_pool_config and KVP_MASTER_SERVICE are then mandatory; the model name comes from
      lib.utils, imported from two directories up or PYTHONPATH, as PyMotor's script does)
  mooncake_config.py pool <out> <user_config>       kv_cache_pool_config + master_server_address
Argument order, messages and exit codes as PyMotor's: the output path comes first; a failure exits 1.
"""

import json
import logging
import os
import sys

# PyMotor's messages and format: failures are logged as "<time> - ERROR - <message>" and the script exits 1; its
# callers (common.sh gen_kv_pool_config, kv_conductor.sh) go on regardless.
logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(levelname)s - %(message)s")
DEFAULT_MASTER_SERVER_PORT = "50088"


def read_user_config(path: str):
    if not os.path.exists(path):
        logging.error("user_config.json does not exist: %s", path)
        return None
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, dict):
        raise ValueError(f"Expected JSON object at root, got: {type(data)}")
    return data


def master_address(kv_pool_cfg: dict):
    master = os.environ.get("KVP_MASTER_SERVICE", "")
    if not master:
        logging.error("Env KVP_MASTER_SERVICE is required but not set, cannot generate kv_cache_pool_config")
        return None
    return master, kv_pool_cfg.get("port", DEFAULT_MASTER_SERVER_PORT)


def write_json(path: str, data: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, ensure_ascii=False)


def pool(out: str, src: str) -> bool:
    user_config = read_user_config(src)
    if user_config is None:
        return False
    kv_cfg = user_config.get("kv_cache_pool_config")
    if not kv_cfg:
        logging.error("KV cache pool config not provided, skipping kv_cache_pool_config generation")
        return False
    address = master_address(kv_cfg)
    if address is None:
        return False
    config = dict(kv_cfg, master_server_address="%s:%s" % address)
    write_json(out, config)
    logging.info("kv_cache_pool_config generated: %s", out)
    return True


def conductor(out: str, src: str) -> bool:
    user_config = read_user_config(src)
    if user_config is None:
        return False
    kv_cfg = user_config.get("kv_conductor_config")
    if not kv_cfg:
        logging.error("KV cache conductor config not provided, skipping kv_conductor_config generation")
        return False
    config = dict(kv_cfg)
    if config.get("kvevent_instance") is None:
        logging.info("KV cache conductor config kvevent_instance is None")
        return True
    kv_pool_cfg = user_config.get("kv_cache_pool_config")
    if not kv_pool_cfg:
        logging.error("KV cache pool config not provided, skipping kv_cache_pool_config generation")
        return False
    address = master_address(kv_pool_cfg)
    if address is None:
        return False
    entry = config["kvevent_instance"]["mooncake_master"]  # KeyError (traceback, exit 1) otherwise, as PyMotor
    entry["endpoint"] = "tcp://%s:%s" % address
    # PyMotor: sys.path gets dirname(dirname(__file__)) (the parent of the config dir, which has no lib/): the
    # import fails (ModuleNotFoundError, exit 1) unless PYTHONPATH leads to the image's deployer tree
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from lib.utils import resolve_model_name  # pylint: disable=import-outside-toplevel

    entry["modelname"] = resolve_model_name(user_config["motor_engine_prefill_config"])
    write_json(out, config)
    logging.info("kv_conductor_config generated: %s", out)
    return True


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        logging.info("Usage: python3 mooncake_config.py <pool|conductor> <output_config_path> <user_config_path>")
        sys.exit(1)
    kind, out, src = argv[:3]
    if kind == "pool":
        ok = pool(out, src)
    elif kind == "conductor":
        ok = conductor(out, src)
    else:
        logging.error("Unknown config type: %s. Expected 'pool' or 'conductor'", kind)
        sys.exit(1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
