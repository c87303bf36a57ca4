"""The real Mooncake conductor, built by playbooks/build_image.yml from the upstream tree with air-gapped Go inputs
(conductor_image_goproxy_dir + conductor_image_go_sum), and the same build with one module altered in the proxy
directory: Go's checksum verification against the pinned go.sum must stop it."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile

import conductor_image


def test_real_conductor_in_image(conformance_conductor_image):
    out = subprocess.run(["docker", "image", "inspect", conformance_conductor_image], capture_output=True, text=True,
                         check=True)
    labels = json.loads(out.stdout)[0]["Config"]["Labels"]
    assert labels["io.pymotor.mooncake.ref"] == "dev/kv-indexer"
    listing = subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "sh",
                              conformance_conductor_image, "-c",
                              "command -v mooncake_conductor && command -v engine_server && ldd /usr/local/bin/mooncake_conductor"],
                             capture_output=True, text=True, check=True).stdout
    assert "/usr/local/bin/mooncake_conductor" in listing and "/opt/conformance/bin/engine_server" in listing
    assert "libzmq" in listing


def test_tampered_module_fails_the_build(conformance_image, tmp_path):
    proxy = tmp_path / "goproxy"
    shutil.copytree(conductor_image.upstream("goproxy"), proxy)
    subprocess.run(["chmod", "-R", "u+w", str(proxy)], check=True)
    module_zip = proxy / "github.com/shamaton/msgpack/v2/@v/v2.4.0.zip"
    with zipfile.ZipFile(module_zip, "a") as archive:  # one extra file: the module's h1: hash changes
        archive.writestr("github.com/shamaton/msgpack/v2@v2.4.0/tampered.go", "package msgpack\n")
    result = conductor_image.build(conformance_image, "local/pymotor-conformance-tampered:test", goproxy_dir=proxy,
                                   go_sum=proxy / "go.sum", state=tmp_path / "state",
                                   prefix="pymotor-conformance-tamper")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-4000:]
    assert "github.com/shamaton/msgpack/v2@v2.4.0: checksum mismatch" in output, output[-4000:]
    assert "SECURITY ERROR" in output, output[-4000:]
    missing = subprocess.run(["docker", "image", "inspect", "local/pymotor-conformance-tampered:test"],
                             capture_output=True, check=False)
    assert missing.returncode != 0, "a failed build must not leave the target image"
