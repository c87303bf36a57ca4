#!/usr/bin/env python3
"""Bring simulated Ascend hosts up and down: containers running their own dockerd that show the
host surface of an Atlas 800I A2 (8 NPUs), A3 (16 dies) or A5 Atlas 350 (8 or 16 cards); see tests/sim/host/

Stable Python API (import with ``sys.path`` pointing at ``tests/sim``, then ``import simctl``):

``ensure_host_image() -> str``
    Build ``local/pymotor-sim-host:<hash of tests/sim/host>`` unless it exists; return the tag.
``up(count=None, hardware="800I_A2", prefix="pymotor-sim", control=False, nic="eth0") -> list[dict]``
    Start hosts ``<prefix>-1..count`` (plus ``<prefix>-ctl`` with ``SIM_HARDWARE=none`` when
    ``control``) on the bridge network ``<prefix>-net`` and wait until each inner dockerd answers.
    ``hardware`` is one type for all hosts or a list with one type per host (``count`` may then be
    omitted). ``nic`` names every host's network interface (``SIM_NIC``: the entrypoint renames
    Docker's eth0, e.g. to ``enp189s0f0`` as on a bare-metal Atlas host). Running hosts with the
    same image, hardware and NIC are reused, others are recreated, and the prefix's hosts not
    asked for are removed.
    Returns ``[{"name", "ip", "hardware", "nic"}, ...]``, NPU hosts first, the control host last.
``hosts(prefix="pymotor-sim") -> list[dict]``
    The running hosts of a prefix, in the same form and order as ``up`` returns them.
``down(prefix="pymotor-sim") -> None``
    Remove the prefix's containers, volumes and network (only objects labelled with it). Idempotent.
``load_image(prefix, image) -> list[str]``
    Copy one image (or a list) from this machine's engine into every host of the prefix that lacks
    that image id. A fresh host (no image, no container yet: what ``up`` makes) gets them from a seed:
    a volume holding a Docker data root with exactly those images loaded, made once per set of image
    ids, whose layer files are hard-linked into the host's data root (its dockerd restarted to read
    them). Other hosts: ``docker save`` once, ``docker load`` into the hosts in parallel. Returns the
    names of the hosts that were loaded.
``host_exec(name, cmd, environment=None) -> (int, str)``
    Run ``cmd`` (a shell string, or an argv list) in a host; return exit code and combined output.
``restart_dockerd(name, timeout=READY_TIMEOUT) -> None``
    Restart a host's Docker engine the way ``systemctl restart docker`` does: SIGTERM to its dockerd (a
    daemon shutdown: nested containers stop but keep their restart policy), the host's entrypoint starts
    dockerd again; return when the new dockerd answers.
``write_inventory(hosts, path, addresses=True) -> None``
    Write an Ansible inventory reaching the hosts through community.docker.docker (``ansible_host``
    = the container name); ``addresses=False`` leaves ``motor_host_ip`` and ``motor_nic`` out, so
    the deploy takes them from the default route the discovery reads.

Every object carries the label ``pymotor.sim=<prefix>``; nothing else on the machine is touched.
CLI: ``simctl.py up|down|status|load-image ...`` (``--help`` on each).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import docker.errors
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from content_tag import content_digest  # noqa: E402  (tests/sim/content_tag.py)

HOST_DIR = Path(__file__).resolve().parent / "host"
IMAGE_REPO = "local/pymotor-sim-host"
# FROM of tests/sim/host/Dockerfile
BASE_IMAGE = "local/debian:bookworm"
DEFAULT_PREFIX = "pymotor-sim"
LABEL = "pymotor.sim"
HARDWARE_LABEL = "pymotor.sim.hardware"
NIC_LABEL = "pymotor.sim.nic"
DEFAULT_NIC = "eth0"
# Atlas A5: the one-chip-per-card types of PyMotor's HARDWARE_TYPE_950I_A5 (schedule policy chip1-node8/16)
HARDWARE_TYPES = ("800I_A2", "800I_A3", "350-Atlas-8", "350-Atlas-16")
CONTROL_HARDWARE = "none"
BUILD_LOCK = Path(tempfile.gettempdir()) / "pymotor-sim-host-build.lock"
READY_TIMEOUT = 120
STOP_TIMEOUT = 20

_client: docker.DockerClient | None = None


def client() -> docker.DockerClient:
    global _client
    if _client is None:
        _client = docker.from_env(timeout=600)
    return _client


# ---------------------------------------------------------------------------------------- image

def host_image_tag() -> str:
    """Tag from the whole build context (files, modes, empty directories) and the base image's id."""
    return f"{IMAGE_REPO}:{content_digest(HOST_DIR, base_image=BASE_IMAGE)[:12]}"


def _image_exists(ref: str) -> bool:
    try:
        client().images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def ensure_host_image() -> str:
    """Build the simulated host image when its content tag is missing; also tag it ``latest``."""
    tag = host_image_tag()
    # A lock file, so parallel test sessions wait for one build instead of racing.
    with open(BUILD_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _image_exists(tag):
            _build(tag)
            _remove_stale_images(keep=tag)
    client().images.get(tag).tag(IMAGE_REPO, "latest")
    return tag


def _remove_stale_images(keep: str) -> None:
    """Drop tags of earlier builds; ones still used by running hosts stay (removal fails)."""
    for image in client().images.list(name=IMAGE_REPO):
        for tag in image.tags:
            if tag not in (keep, f"{IMAGE_REPO}:latest"):
                with contextlib.suppress(docker.errors.APIError):
                    client().images.remove(tag)


def _build(tag: str) -> None:
    log = []
    # network_mode host: apt inside the build reaches the Debian mirror like on the machine.
    stream = client().api.build(path=str(HOST_DIR), tag=tag, network_mode="host", rm=True,
                                forcerm=True, decode=True)
    for chunk in stream:
        log.append(chunk.get("stream", ""))
        if "error" in chunk:
            tail = "".join(log)[-3000:]
            raise RuntimeError(f"building {tag} failed: {chunk['error']}\n{tail}")


# ---------------------------------------------------------------------------------------- hosts

def _host_specs(count: int | None, hardware: str | list[str], prefix: str,
                control: bool | int) -> list[tuple[str, str]]:
    """[(name, hardware)] for the requested hosts; ``control`` True or a number of control hosts (no NPUs):
    ``<prefix>-ctl``, then ``<prefix>-ctl2``, ``<prefix>-ctl3``..."""
    if isinstance(hardware, str):
        types = [hardware] * (1 if count is None else count)
    else:
        types = list(hardware)
    if count is not None and len(types) != count:
        raise ValueError(f"count={count} but {len(types)} hardware types given")
    unknown = sorted(set(types) - set(HARDWARE_TYPES))
    if unknown:
        raise ValueError(f"unknown hardware {unknown}: expected one of {HARDWARE_TYPES}")
    specs = [(f"{prefix}-{i}", hw) for i, hw in enumerate(types, start=1)]
    for i in range(1, int(control) + 1):
        specs.append((f"{prefix}-ctl" + ("" if i == 1 else str(i)), CONTROL_HARDWARE))
    return specs


def _network(prefix: str):
    name = f"{prefix}-net"
    found = client().networks.list(names=[name])
    if found:
        net = found[0]
        if net.attrs.get("Labels", {}).get(LABEL) != prefix:
            raise RuntimeError(f"network {name} exists but is not labelled {LABEL}={prefix}")
        return net
    return client().networks.create(name, driver="bridge", labels={LABEL: prefix})


def _existing(name: str):
    try:
        return client().containers.get(name)
    except docker.errors.NotFound:
        return None


def _containers(prefix: str) -> list:
    return client().containers.list(all=True, filters={"label": f"{LABEL}={prefix}"})


def _reusable(container, image_tag: str, hardware: str, nic: str) -> bool:
    return (container.status == "running"
            and image_tag in container.image.tags
            and container.labels.get(HARDWARE_LABEL) == hardware
            and container.labels.get(NIC_LABEL, DEFAULT_NIC) == nic)


def _start_host(name: str, hardware: str, prefix: str, image_tag: str, network, nic: str = DEFAULT_NIC) -> None:
    old = _existing(name)
    if old is not None:
        if old.labels.get(LABEL) != prefix:
            raise RuntimeError(f"container {name} exists but is not labelled {LABEL}={prefix}")
        if _reusable(old, image_tag, hardware, nic):
            return
        _remove_container(old)
    labels = {LABEL: prefix}
    volume = client().volumes.create(f"{name}-docker", labels=labels)
    client().containers.run(
        image_tag, detach=True, name=name, hostname=name, network=network.name,
        environment={"SIM_HARDWARE": hardware, "SIM_NIC": nic},
        labels={**labels, HARDWARE_LABEL: hardware, NIC_LABEL: nic}, **_dind_options(volume.name))


def _dind_options(volume: str) -> dict:
    """Docker-in-Docker without --privileged (which fails on these machines): every capability
    the bounding set allows, no seccomp/apparmor, all device cgroups, host cgroupfs, and a
    real volume for /var/lib/docker so overlay2 works inside."""
    return {"cap_add": ["ALL"], "cap_drop": ["SYS_RESOURCE"],
            "security_opt": ["seccomp=unconfined", "apparmor=unconfined"],
            "device_cgroup_rules": ["a *:* rwm"],
            "volumes": {"/sys/fs/cgroup": {"bind": "/sys/fs/cgroup", "mode": "rw"},
                        volume: {"bind": "/var/lib/docker", "mode": "rw"}}}


def _wait_ready(name: str, timeout: float = READY_TIMEOUT) -> None:
    """Poll the inner ``docker info`` until it answers; fail fast when the host died."""
    deadline = time.monotonic() + timeout
    container = client().containers.get(name)
    while time.monotonic() < deadline:
        container.reload()
        if container.status != "running":
            logs = container.logs(tail=30).decode(errors="replace")
            raise RuntimeError(f"simulated host {name} is {container.status}:\n{logs}")
        if container.exec_run(["docker", "info", "--format", "{{.ServerVersion}}"]).exit_code == 0:
            return
        time.sleep(0.5)
    _, dockerd_log = host_exec(name, "tail -n 30 /var/log/dockerd.log")
    raise TimeoutError(f"dockerd in {name} did not answer within {timeout:.0f} s:\n{dockerd_log}")


def _parallel(func, items) -> list:
    items = list(items)
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        return list(pool.map(func, items))


def _describe(container, prefix: str) -> dict:
    networks = container.attrs["NetworkSettings"]["Networks"]
    return {"name": container.name,
            "ip": networks[f"{prefix}-net"]["IPAddress"],
            "hardware": container.labels[HARDWARE_LABEL],
            "nic": container.labels.get(NIC_LABEL, DEFAULT_NIC)}


def _host_order(host: dict) -> tuple:
    """NPU hosts by number, the control hosts last (ctl, ctl2, ctl3...)."""
    suffix = host["name"].rsplit("-", 1)[-1]
    return (0, int(suffix)) if suffix.isdigit() else (1, int(suffix[3:] or 1) if suffix[3:].isdigit() else 0)


def hosts(prefix: str = DEFAULT_PREFIX) -> list[dict]:
    found = client().containers.list(filters={"label": f"{LABEL}={prefix}", "status": "running"})
    return sorted((_describe(c, prefix) for c in found), key=_host_order)


def up(count: int | None = None, hardware: str | list[str] = "800I_A2",
       prefix: str = DEFAULT_PREFIX, control: bool | int = False, nic: str = DEFAULT_NIC) -> list[dict]:
    specs = _host_specs(count, hardware, prefix, control)
    image_tag = ensure_host_image()
    network = _network(prefix)
    wanted = {name for name, _ in specs}
    _parallel(_remove_container, [c for c in _containers(prefix) if c.name not in wanted])
    for name, hw in specs:
        _start_host(name, hw, prefix, image_tag, network, nic)
    _parallel(_wait_ready, [name for name, _ in specs])
    return hosts(prefix)


def _remove_container(container) -> None:
    # A graceful stop lets the host's entrypoint stop nested containers, whose cgroups live in
    # the machine's cgroupfs, before the container and its /var/lib/docker volume go.
    with contextlib.suppress(docker.errors.NotFound):
        container.stop(timeout=STOP_TIMEOUT)
        container.remove(force=True, v=True)
    with contextlib.suppress(docker.errors.NotFound):
        client().volumes.get(f"{container.name}-docker").remove(force=True)


def down(prefix: str = DEFAULT_PREFIX) -> None:
    label = {"label": f"{LABEL}={prefix}"}
    _parallel(_remove_container, _containers(prefix))
    _parallel(lambda volume: volume.remove(force=True), client().volumes.list(filters=label))
    for network in client().networks.list(filters=label):
        network.remove()


# ---------------------------------------------------------------------------------------- exec

def host_exec(name: str, cmd: str | list[str],
              environment: dict[str, str] | None = None) -> tuple[int, str]:
    argv = ["sh", "-c", cmd] if isinstance(cmd, str) else cmd
    result = client().containers.get(name).exec_run(argv, environment=environment)
    return result.exit_code, result.output.decode(errors="replace")


def _dockerd_pid(name: str) -> str:
    rc, out = host_exec(name, "cat /var/run/docker.pid 2>/dev/null")
    return out.strip() if rc == 0 else ""


def restart_dockerd(name: str, timeout: float = READY_TIMEOUT) -> None:
    """SIGTERM to the host's dockerd (not ``docker stop``: that would mark ``unless-stopped`` containers stopped);
    the entrypoint supervises dockerd and starts it again. Wait until a new dockerd answers."""
    old = _dockerd_pid(name)
    rc, out = host_exec(name, "pkill -TERM -x dockerd")
    if rc != 0:
        raise RuntimeError(f"no dockerd to restart in {name} (pkill rc {rc}): {out.strip()}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = _dockerd_pid(name)
        if pid and pid != old:
            _wait_ready(name, max(1.0, deadline - time.monotonic()))
            return
        time.sleep(0.5)
    _, dockerd_log = host_exec(name, "tail -n 30 /var/log/dockerd.log")
    raise TimeoutError(f"dockerd in {name} did not come back within {timeout:.0f} s:\n{dockerd_log}")


def _host_image_id(name: str, image: str) -> str:
    rc, out = host_exec(name, ["docker", "image", "inspect", "--format", "{{.Id}}", image])
    return out.strip() if rc == 0 else ""


def _load_into(name: str, archive: Path) -> None:
    with open(archive, "rb") as stream:
        result = subprocess.run(["docker", "exec", "-i", name, "docker", "load"], stdin=stream,
                                capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"docker load into {name} failed: {result.stderr.strip()}")


def _is_fresh(name: str) -> bool:
    rc, out = host_exec(name, ["docker", "info", "--format", "{{.Images}} {{.Containers}}"])
    return rc == 0 and out.split() == ["0", "0"]


def load_image(prefix: str, image: str | list[str]) -> list[str]:
    """Load images into the prefix's hosts that lack them; return the hosts that were loaded."""
    refs = [image] if isinstance(image, str) else list(image)
    wanted = {ref: client().images.get(ref).id for ref in refs}
    names = [h["name"] for h in hosts(prefix)]
    lacking = [n for n in names
               if any(_host_image_id(n, ref) != image_id for ref, image_id in wanted.items())]
    fresh = [n for n, is_fresh in zip(lacking, _parallel(_is_fresh, lacking), strict=True) if is_fresh]
    if fresh:
        _seed_hosts(fresh, wanted)
    loaded = set(fresh)
    for ref, image_id in wanted.items():
        missing = [n for n in lacking if n not in fresh and _host_image_id(n, ref) != image_id]
        if not missing:
            continue
        with tempfile.TemporaryDirectory(prefix="pymotor-sim-") as tmp:
            archive = Path(tmp) / "image.tar"
            subprocess.run(["docker", "save", "-o", str(archive), ref], check=True)
            _parallel(functools.partial(_load_into, archive=archive), missing)
        loaded.update(missing)
    return sorted(loaded)


# ------------------------------------------------------------------------------ image seeds
# A `docker load` into every simulated host of every test module's cluster cost about 11 CPU s per host and 6 s per
# `docker save` for the 288 MB stand-in image (more for the 740 MB conformance image): a large share of a CPU-bound
# suite. A seed is loaded once per set of image ids and machine; a fresh host's data root then gets a copy of the
# seed's image metadata and hard links to its layer files (0.5 CPU s). Hard links are safe here: the layers are
# overlayfs lower directories, never written in place (a container's writes go to its own upper directory), and a
# host that removes an image only unlinks its own names.
SEED_PREFIX = "pymotor-sim-seed"
SEED_KEY_LABEL = "pymotor.sim.seed"
SEED_IMAGES_LABEL = "pymotor.sim.seed.images"
SEED_MARKER = ".pymotor-seed-complete"


def _in_volumes(host_image: str, script: str, environment: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``script`` in a throwaway container of ``host_image`` that sees every volume of this engine under /vols
    (one mount, so hard links between two volumes work: link(2) refuses to cross mounts)."""
    root = client().info()["DockerRootDir"]
    container = client().containers.run(
        host_image, entrypoint=["sh", "-c", script], environment=environment or {}, detach=True,
        network_mode="none", labels={LABEL: SEED_PREFIX},
        volumes={f"{root}/volumes": {"bind": "/vols", "mode": "rw"}})
    try:
        rc = container.wait()["StatusCode"]
        return rc, container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)


def _ensure_seed(host_image: str, wanted: dict[str, str]) -> str:
    """The seed volume holding exactly these images (made under a machine-wide lock when missing)."""
    image_ids = sorted(set(wanted.values()))
    seed_ids = [client().images.get(host_image).id, *image_ids]  # the host image's dockerd wrote the seed
    key = hashlib.sha256("\n".join(seed_ids).encode()).hexdigest()[:16]
    name = f"{SEED_PREFIX}-{key}"
    with open(Path(tempfile.gettempdir()) / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _in_volumes(host_image, f'test -f "/vols/{name}/_data/{SEED_MARKER}"')[0] == 0:
            return name
        _remove_stale_seeds()
        with contextlib.suppress(docker.errors.NotFound):
            client().volumes.get(name).remove(force=True)
        volume = client().volumes.create(name, labels={LABEL: SEED_PREFIX, SEED_KEY_LABEL: key,
                                                        SEED_IMAGES_LABEL: ",".join(seed_ids)})
        seeder = f"{name}-loader"
        with contextlib.suppress(docker.errors.NotFound):
            client().containers.get(seeder).remove(force=True)
        client().containers.run(host_image, detach=True, name=seeder, environment={"SIM_HARDWARE": "none"},
                                labels={LABEL: SEED_PREFIX}, **_dind_options(volume.name))
        try:
            _wait_ready(seeder)
            with tempfile.TemporaryDirectory(prefix="pymotor-sim-") as tmp:
                archive = Path(tmp) / "images.tar"
                subprocess.run(["docker", "save", "-o", str(archive), *image_ids], check=True)
                _load_into(seeder, archive)
            client().containers.get(seeder).stop(timeout=STOP_TIMEOUT)  # dockerd ends cleanly: its stores are whole
        finally:
            client().containers.get(seeder).remove(force=True)
        rc, out = _in_volumes(host_image, f'touch "/vols/{name}/_data/{SEED_MARKER}"')
        if rc != 0:
            raise RuntimeError(f"seed {name} could not be marked complete: {out.strip()}")
        return name


def _remove_stale_seeds() -> None:
    """Seeds of image ids this engine no longer has (an earlier build) are dropped; one in use stays."""
    present = {image.id for image in client().images.list()}
    for volume in client().volumes.list(filters={"label": f"{LABEL}={SEED_PREFIX}"}):
        ids = (volume.attrs.get("Labels") or {}).get(SEED_IMAGES_LABEL, "").split(",")
        if not set(ids) <= present:
            with contextlib.suppress(docker.errors.APIError):
                volume.remove()


def _seed_hosts(names: list[str], wanted: dict[str, str]) -> None:
    """Give fresh hosts the wanted images from their seed, tagged exactly as asked, then restart their dockerd."""
    host_image = ensure_host_image()
    seed = _ensure_seed(host_image, wanted)
    repositories: dict[str, dict[str, str]] = {}
    for ref, image_id in wanted.items():
        repositories.setdefault(ref.rpartition(":")[0] if ":" in ref.rpartition("/")[2] else ref, {})[ref] = image_id
    script = ('set -e; s="/vols/$SEED/_data"; d="/vols/$VOLUME/_data"; '
              'rm -rf "$d/image/overlay2"; mkdir -p "$d/image" "$d/overlay2"; cp -a "$s/image/overlay2" "$d/image/"; '
              'printf "%s" "$REPOSITORIES" > "$d/image/overlay2/repositories.json"; '
              'cp -al "$s/overlay2/." "$d/overlay2/"')

    def populate(name: str) -> None:
        rc, out = _in_volumes(host_image, script, {"SEED": seed, "VOLUME": f"{name}-docker",
                                       "REPOSITORIES": json.dumps({"Repositories": repositories})})
        if rc != 0:
            raise RuntimeError(f"seeding {name} from {seed} failed: {out.strip()}")
        restart_dockerd(name)

    _parallel(populate, names)


# ----------------------------------------------------------------------------------- inventory

def write_inventory(host_list: list[dict], path: str | Path, addresses: bool = True) -> None:
    """Ansible inventory: NPU hosts in motor_engine_hosts, the control host (else the first
    NPU host) in motor_control_hosts, all reached through the community.docker connection;
    with ``addresses`` each host's motor_host_ip and motor_nic."""
    nics = {h.get("nic", DEFAULT_NIC) for h in host_list}

    def host_vars(h):
        if not addresses:
            return {"ansible_host": h["name"]}
        own = {"ansible_host": h["name"], "motor_host_ip": h["ip"]}
        return own if len(nics) == 1 else {**own, "motor_nic": h.get("nic", DEFAULT_NIC)}

    engines = [h for h in host_list if h["hardware"] != CONTROL_HARDWARE]
    controls = [h for h in host_list if h["hardware"] == CONTROL_HARDWARE] or engines[:1]
    inventory = {"all": {
        "vars": {"ansible_connection": "community.docker.docker",
                 "ansible_python_interpreter": "/usr/bin/python3",
                 **({"motor_nic": next(iter(nics))} if addresses and len(nics) == 1 else {})},
        "children": {
            "motor_engine_hosts": {"hosts": {h["name"]: host_vars(h) for h in engines}},
            "motor_control_hosts": {"hosts": {h["name"]: host_vars(h) for h in controls}},
        }}}
    Path(path).write_text(yaml.safe_dump(inventory, sort_keys=False))


# ----------------------------------------------------------------------------------------- CLI

def _hardware_list(values: list[str], count: int | None) -> list[str]:
    """--hardware TYPE (repeatable) or TYPE=COUNT; one TYPE alone applies to all --count hosts."""
    types = []
    for value in values:
        hw, _, n = value.partition("=")
        types += [hw] * (int(n) if n else 1)
    if count is not None and len(values) == 1 and "=" not in values[0]:
        types = types * count
    return types


def _print_hosts(host_list: list[dict]) -> None:
    for h in host_list:
        print(f"{h['name']}\t{h['ip']}\t{h['hardware']}\t{h['nic']}")


def _cmd_up(args) -> None:
    started = time.monotonic()
    types = _hardware_list(args.hardware or ["800I_A2"], args.count)
    host_list = up(args.count, types, args.prefix, control=args.control, nic=args.nic)
    _print_hosts(host_list)
    if args.inventory:
        write_inventory(host_list, args.inventory, addresses=not args.no_addresses)
    print(f"# {len(host_list)} hosts ready in {time.monotonic() - started:.1f} s", file=sys.stderr)


def _cmd_load_image(args) -> None:
    loaded = load_image(args.prefix, args.images)
    print("loaded into: " + (", ".join(loaded) or "none (all hosts had the images)"))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p_up = sub.add_parser("up", help="start simulated hosts and wait for their dockerd")
    p_up.add_argument("--count", type=int)
    p_up.add_argument("--hardware", action="append", metavar="TYPE[=N]",
                      help=f"one of {', '.join(HARDWARE_TYPES)}; repeat or use TYPE=N to mix")
    p_up.add_argument("--control", action="store_true",
                      help="add <prefix>-ctl, a control host without NPUs")
    p_up.add_argument("--nic", default=DEFAULT_NIC, metavar="NAME",
                      help="name of every host's network interface (Docker's eth0 renamed), e.g. enp189s0f0")
    p_up.add_argument("--inventory", metavar="FILE", help="write an Ansible inventory here")
    p_up.add_argument("--no-addresses", action="store_true",
                      help="leave motor_host_ip and motor_nic out of the inventory (taken from the default route)")
    p_up.set_defaults(func=_cmd_up)

    p_down = sub.add_parser("down", help="remove the prefix's containers, volumes and network")
    p_down.set_defaults(func=lambda a: down(a.prefix))

    p_status = sub.add_parser("status", help="list the prefix's running hosts")
    p_status.set_defaults(func=lambda a: _print_hosts(hosts(a.prefix)))

    p_load = sub.add_parser("load-image", help="copy local images into the hosts lacking them")
    p_load.add_argument("images", nargs="+", metavar="IMAGE")
    p_load.set_defaults(func=_cmd_load_image)

    p_image = sub.add_parser("build", help="build the host image if missing; print its tag")
    p_image.set_defaults(func=lambda a: print(ensure_host_image()))

    for p in (p_up, p_down, p_status, p_load):
        p.add_argument("--prefix", default=DEFAULT_PREFIX)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
