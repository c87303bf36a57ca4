#!/usr/bin/env python3
"""probe.py <role> <startup|readiness|liveness>: GET http://$POD_IP:<port>/<type>, exit 0 on 200.
The port is api_config.<role>_api_port; the coordinator has no such key, so like PyMotor it always
probes 1026 (its default management port)."""

import json
import os
import sys
import urllib.request


def probe_port(role: str, user_config: dict) -> int:
    api = (user_config.get(f"motor_{role}_config") or {}).get("api_config") or {}
    return int(api.get(f"{role}_api_port") or 1026)


def main(role: str, kind: str) -> int:
    with open(os.environ["USER_CONFIG_PATH"], encoding="utf-8") as fh:
        user_config = json.load(fh)
    url = f"http://{os.environ.get('POD_IP', '127.0.0.1')}:{probe_port(role, user_config)}/{kind}"
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            print(resp.read().decode())
            return 0 if resp.status == 200 else 1
    except OSError as exc:
        print(f"{url}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
