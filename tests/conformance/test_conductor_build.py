"""The real Mooncake conductor, built by playbooks/build_image.yml from the upstream tree with air-gapped Go inputs
(conductor_image_goproxy_dir + conductor_image_go_sum), and the same build with one module altered in the proxy
directory: Go's checksum verification against the pinned go.sum must stop it. The key schema the build stored
(role image_schema: the image's real ``motor`` package read by running the image once) and validate.yml checking a
configuration against it; schema.yml storing the one of an image built elsewhere."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile

import conductor_image

SEED = conductor_image.REPO_ROOT / "examples" / "seed_pd_separation"
COORD_SCHEDULER = "motor_coordinator_config.scheduler_config"
# the real node manager builds basic_config.parallel_config as motor.common.resources.instance.ParallelConfig
# (motor/config/node_manager.py:18 and :392), whose fields include ep_size (instance.py:78)
KNOWN_TO_THE_IMAGE = {"motor_nodemanger_config": {"basic_config": {"parallel_config": {"ep_size": 1}}}}
FAR_KEY = {"motor_controller_config": {"instance_config": {"zebra_crossing_knob": 1}}}
TYPO = {"motor_coordinator_config": {"scheduler_config": {"schedular_type": "kv_cache_affinity"}}}


def image_id(image: str) -> str:
    return subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", image], capture_output=True, text=True,
                          check=True).stdout.strip()


def playbook(name: str, variables: dict, *extra: str) -> subprocess.CompletedProcess:
    argv = [str(conductor_image.VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
            str(conductor_image.REPO_ROOT / "playbooks" / name),
            "-e", f"ansible_python_interpreter={conductor_image.VENV_BIN / 'python'}", "-e", json.dumps(variables), *extra]
    return subprocess.run(argv, cwd=conductor_image.REPO_ROOT, env=conductor_image.ansible_env(), capture_output=True,
                          text=True, timeout=600, check=False)


def one_line(result: subprocess.CompletedProcess) -> str:
    return " ".join((result.stdout + result.stderr).split())


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
    # refused on the controller before any build container (Go's own check in the build would refuse it as well)
    assert "github.com/shamaton/msgpack/v2@v2.4.0: checksum mismatch: go.sum pins h1:O5Z08MRmbo0lA9o2xnQ4TXx6teJbPqEurqcCOQ8Oi/4=" \
        in output, output[-4000:]
    assert "Start the build container" not in output, output[-4000:]
    missing = subprocess.run(["docker", "image", "inspect", "local/pymotor-conformance-tampered:test"],
                             capture_output=True, check=False)
    assert missing.returncode != 0, "a failed build must not leave the target image"


def test_keys_checked_against_the_schema_of_the_built_image(conformance_conductor_image, conformance_image, tmp_path):
    built_id = image_id(conformance_conductor_image)
    stored = conductor_image.STATE / "schemas"  # build_image.yml's motor_key_schema_dir (conductor_image.build)
    record = json.loads((stored / (built_id.split(":")[1] + ".json")).read_text(encoding="utf-8"))
    pymotor = record["schema"]["pymotor"]
    assert record["image_id"] == built_id and pymotor["version"] == "0.1.0", record["schema"]["errors"]
    assert "ep_size" in pymotor["classes"]["instance.ParallelConfig"]
    assert record["schema"]["vllm"] is None  # the conformance image carries one vLLM file, not vLLM

    # an image built elsewhere: schema.yml stores its schema the same way
    elsewhere = tmp_path / "schemas"
    result = playbook("schema.yml", {"motor_image": conformance_image, "motor_build_host": "localhost",
                                     "motor_key_schema_dir": str(elsewhere)})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert f"key schema of {conformance_image} ({image_id(conformance_image)}) stored in {elsewhere}" in result.stdout
    assert "PyMotor 0.1.0: " in result.stdout
    assert (elsewhere / (image_id(conformance_image).split(":")[1] + ".json")).is_file()

    source = f"PyMotor 0.1.0 of {conformance_conductor_image} ({built_id.split(':')[1][:12]})"
    common = {"motor_config_dir": str(SEED), "motor_image": conformance_conductor_image,
              "motor_key_schema_dir": str(stored)}
    # a key the image's PyMotor reads passes with no warning; a key far from all is a warning naming the image
    passed = playbook("validate.yml", dict(common, motor_user_config_overrides=[KNOWN_TO_THE_IMAGE, FAR_KEY]))
    output = one_line(passed)
    assert passed.returncode == 0, passed.stdout[-4000:]
    assert f"keys checked against {source}, the built-in vLLM list" in output
    assert "ep_size" not in output
    assert (f"motor_controller_config.instance_config.zebra_crossing_knob: not known to {source}, the image being "
            "deployed") in output
    # a typo fails by name; with motor_unknown_keys=error the far key too
    refused = playbook("validate.yml", dict(common, motor_user_config_overrides=[TYPO, FAR_KEY]),
                       "-e", "motor_unknown_keys=error")
    output = one_line(refused)
    assert refused.returncode != 0, refused.stdout[-4000:]
    assert (f"{COORD_SCHEDULER}.schedular_type: unknown key of {COORD_SCHEDULER} (SchedulerConfig), close to "
            f"'scheduler_type' (keys checked against {source})") in output
    assert ("motor_controller_config.instance_config.zebra_crossing_knob: unknown key of "
            f"motor_controller_config.instance_config (InstanceConfig): not known to {source}") in output
