"""Make the conductor-patched stand-in image for the deploy scenarios and tag it as argv[1].

The same image the image-build role produces from the stand-in (stand-in + /usr/local/bin/mooncake_conductor),
made the fast way tests/integration/test_standin_cluster.py does it (fixture conductor binary, cached by hash),
so that a deploy scenario stays within its time budget. Prints the tag.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
for sub in ("tests/sim/motor_image", "tests/fixtures/mooncake"):
    sys.path.insert(0, str(ROOT / sub))

import build as standin_build  # noqa: E402  (tests/sim/motor_image/build.py)
import build_conductor  # noqa: E402


def main() -> None:
    target = sys.argv[1]
    base = standin_build.ensure_standin_image()
    binary = build_conductor.ensure_conductor_binary()
    with tempfile.TemporaryDirectory() as ctx:
        (Path(ctx) / "mooncake_conductor").write_bytes(binary.read_bytes())
        (Path(ctx) / "mooncake_conductor").chmod(0o755)
        (Path(ctx) / "Dockerfile").write_text(
            f"FROM {base}\nCOPY mooncake_conductor /usr/local/bin/mooncake_conductor\n"
            f'LABEL io.pymotor.base="{base}" io.pymotor.conductor="{binary.name}"\n')
        subprocess.run(["docker", "build", "-q", "-t", target, ctx], check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ, "DOCKER_BUILDKIT": "0"})
    print(target)


if __name__ == "__main__":
    main()
