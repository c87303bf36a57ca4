"""Unit tests of plugins/plugin_utils/reconcile/precheck.py (and its filter shim) on a real plan of the seed
PD-separation config: every check names the host, the check and the fix; settings follow each host's own values."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.pymotor.ascend.plugins.filter.motor_plan import motor_plan_cert_dirs
from ansible_collections.pymotor.ascend.plugins.filter.motor_precheck import motor_precheck
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.planner import build_plan
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.render import model_dirs
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.hashes import spec_digest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.precheck import PrecheckError, host_problems, host_settings
from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.decide import precheck

SEED = Path(__file__).resolve().parents[4] / "examples" / "seed_pd_separation"
HOSTS = {
    "h1": {"motor_host_ip": "10.0.0.1", "group_names": ["motor_engine_hosts"], "motor_hardware_type": "800I_A2"},
    "ctl": {"motor_host_ip": "10.0.0.9", "group_names": ["motor_control_hosts"]},
}
DEFAULTS = {
    "motor_service_image": "local/pymotor:1",
    "motor_service_config_root": "/etc/pymotor",
    "motor_service_docker_min_version": "20.10.0",
    "motor_service_driver_dir": "/usr/local/Ascend/driver",
    "motor_service_hccn_tool": "/usr/local/Ascend/driver/tools/hccn_tool",
    "motor_service_log_root": "/var/log/pymotor",
    "motor_service_min_free_log_mb": 1024,
    "motor_service_check_links": True,
    "motor_service_engine_mounts": ["/usr/local/Ascend/driver", "/usr/local/sbin/npu-smi", "/etc/hccn.conf"],
    "motor_service_command": ["bash", "-c", "source $CONFIGMAP_PATH/boot.sh"],
    "motor_service_restart_policy": "unless-stopped",
    "motor_service_log_max_size": "100m",
    "motor_service_log_max_file": "5",
    "motor_service_env_functions": {"common.sh": ["set_common_env"], "engine.sh": ["set_prefill_env"]},
    "motor_service_extra_volumes": [],
}


@pytest.fixture(scope="module")
def plan():
    user = json.loads((SEED / "user_config.json").read_text())
    return build_plan(normalize(user, json.loads((SEED / "env.json").read_text())), HOSTS)


def healthy_probe(plan, host):
    """What motor_host_probe reads on a host that is ready for its planned containers."""
    own = [c for c in plan["containers"] if c["host"] == host]
    npus = sorted({n for c in own for n in c["npu_ids"]}) or [0]
    return {
        "can_talk_to_docker": True, "host_info": {"ServerVersion": "24.0.7"}, "images": [{"Id": "sha256:img"}],
        "containers": [], "npu_devices": npus, "npu_health": {str(n): "OK" for n in npus}, "npu_error": "",
        "listening": [22], "links": {str(n): "UP" for n in npus},
        "npu_network": {str(n): {"ip": "29.%d.0.%d" % (sum(map(ord, host)) % 250, n + 1), "tls": "0"} for n in npus},
        "free_mb": 50000,
        "paths": {p: True for p in DEFAULTS["motor_service_engine_mounts"]
                  + [DEFAULTS["motor_service_hccn_tool"], "/mnt/weight"]},
        "models": {m: "ok" for m in model_dirs(own)},
    }


def judge(plan, probes, overrides=None, hosts=("h1", "ctl")):
    return precheck(plan, list(hosts), probes, DEFAULTS, overrides or {})


def probes_of(plan, **changes):
    out = {h: healthy_probe(plan, h) for h in ("h1", "ctl")}
    for host, change in changes.items():
        change(out[host])
    return out


def test_healthy_hosts_have_no_problems_and_get_their_parts(plan):
    result = judge(plan, probes_of(plan))
    assert result["problems"] == []
    assert set(result["parts"]) == {c["name"] for c in plan["containers"]}
    assert result["hosts"]["h1"] == {"image_id": "sha256:img", "problems": [],
                                     "mounts_present": ["/usr/local/Ascend/driver", "/usr/local/sbin/npu-smi",
                                                        "/etc/hccn.conf"]}


def test_parts_are_the_digests_the_role_settings_gave_before(plan):
    """The shared part is sha256 of the sorted JSON of the same shared spec the role's Jinja built (no restart on
    upgrade); the spec part is motor_reconcile's spec digest."""
    result = judge(plan, probes_of(plan))
    engine = next(c for c in plan["containers"] if c["host"] == "h1")
    shared = {"image": "local/pymotor:1", "command": DEFAULTS["motor_service_command"],
              "restart_policy": "unless-stopped", "log": ["/var/log/pymotor", "100m", "5"], "weight_dir": "/mnt/weight",
              "mounts": result["hosts"]["h1"]["mounts_present"], "env_functions": DEFAULTS["motor_service_env_functions"],
              "extra_volumes": []}
    assert result["parts"][engine["name"]] == {
        "image": "sha256:img", "spec": spec_digest(engine),
        "shared": hashlib.sha256(json.dumps(shared, sort_keys=True).encode()).hexdigest()}


def test_every_problem_of_every_host_at_once(plan):
    engine = [c for c in plan["containers"] if c["host"] == "h1"]
    engine_port = engine[0]["ports"][0]
    controller = next(c for c in plan["containers"] if c["role"] == "controller")

    def sick_engine(p):
        p["npu_health"][str(engine[0]["npu_ids"][0])] = "Alarm"
        p["npu_devices"].remove(engine[-1]["npu_ids"][-1])
        p["listening"].append(engine_port)
        p["paths"]["/usr/local/Ascend/driver/tools/hccn_tool"] = False
        p["paths"]["/mnt/weight"] = False
        p["models"] = {m: "missing" for m in p["models"]}
        p["free_mb"] = 10

    def sick_control(p):
        p["listening"].append(controller["ports"][0])
        p["images"] = []
        p["host_info"]["ServerVersion"] = "19.03.1"

    problems = judge(plan, probes_of(plan, h1=sick_engine, ctl=sick_control))["problems"]
    expected = [
        f"h1: NPU {engine[0]['npu_ids'][0]} health: npu-smi info reports Alarm (fix: repair the NPU",
        f"h1: NPU {engine[-1]['npu_ids'][-1]}: /dev/davinci{engine[-1]['npu_ids'][-1]} is not listed by npu-smi info",
        "h1: hccn_tool: /usr/local/Ascend/driver/tools/hccn_tool is missing (fix:",
        f"h1: port {engine_port}: already in use by another process, but planned for {engine[0]['name']} (fix:",
        "h1: weights: /mnt/weight (motor_deploy_config.weight_mount_path) is missing (fix:",
        "h1: model: ",
        "h1: disk: 10 MiB free for logs under /var/log/pymotor, need 1024 (fix:",
        "ctl: docker version: 19.03.1 is older than 20.10.0 (fix: upgrade the Docker engine)",
        "ctl: image: local/pymotor:1 is not present on the host (fix: run playbooks/build_image.yml",
        f"ctl: port {controller['ports'][0]}: already in use by another process, but planned for {controller['name']}",
    ]
    for line in expected:
        assert any(p.startswith(line) for p in problems), f"{line!r} not in {problems}"
    assert all("(fix: " in p for p in problems)


def test_unread_host_and_unanswering_engine(plan):
    problems = judge(plan, {"ctl": {"can_talk_to_docker": False, "npu_devices": [], "msg": " connection refused "}})
    assert problems["problems"][0].startswith("h1: host: not read before planning (fix: run playbooks/deploy.yml")
    assert any(p.startswith("ctl: docker: the Docker engine does not answer (connection refused) (fix: start dockerd")
               for p in problems["problems"]), problems["problems"]


def test_ports_of_our_own_running_containers_are_not_problems(plan):
    controller = next(c for c in plan["containers"] if c["role"] == "controller")

    def running_old(p):
        p["listening"] += controller["ports"]
        p["containers"] = [{"Names": ["/old"], "Status": "Up 3 minutes",
                            "Labels": {"io.pymotor.ports": ",".join(map(str, controller["ports"]))}}]

    assert judge(plan, probes_of(plan, ctl=running_old))["problems"] == []

    def exited_old(p):
        running_old(p)
        p["containers"][0]["Status"] = "Exited (1) 2 minutes ago"

    assert judge(plan, probes_of(plan, ctl=exited_old))["problems"]


def test_a_hosts_own_settings_win_for_that_host(plan):
    def elsewhere(p):
        p["paths"] = {"/opt/Ascend/driver": True, "/opt/Ascend/driver/tools/hccn_tool": True, "/mnt/weight": True}

    probes = probes_of(plan, h1=elsewhere)
    assert any("h1: driver: /usr/local/Ascend/driver is missing" in p for p in judge(plan, probes)["problems"])
    overrides = {"h1": {"motor_service_driver_dir": "/opt/Ascend/driver",
                        "motor_service_hccn_tool": "/opt/Ascend/driver/tools/hccn_tool",
                        "motor_service_engine_mounts": ["/opt/Ascend/driver"]}}
    result = judge(plan, probes, overrides)
    assert result["problems"] == []
    assert result["hosts"]["h1"]["mounts_present"] == ["/opt/Ascend/driver"]


def test_a_docker_engine_without_docker_init_is_named_only_when_the_containers_run_one(plan):
    def no_init(p):
        p["host_info"]["InitVersion"] = "N/A"  # docker info's init version when the engine finds no docker-init

    probes = probes_of(plan, h1=no_init)
    assert judge(plan, probes)["problems"] == []  # the setting off (older callers): nothing to judge
    overrides = {h: {"motor_service_init": True} for h in ("h1", "ctl")}
    problems = judge(plan, probes, overrides)["problems"]
    assert len(problems) == 1 and problems[0].startswith("h1: docker init: the Docker engine has no docker-init")
    assert "motor_service_init: false" in problems[0]
    assert judge(plan, probes_of(plan), overrides)["problems"] == []  # an engine that did not say: not judged

    def debian_tini(p):
        p["host_info"]["InitVersion"] = ""  # Debian's tini prints no git commit: docker info's init version is empty

    assert judge(plan, probes_of(plan, h1=debian_tini), overrides)["problems"] == []
    # a string from the command line (-e motor_service_init=false) is read as Ansible's bool filter reads it
    assert judge(plan, probes, {h: {"motor_service_init": "false"} for h in ("h1", "ctl")})["problems"] == []
    assert host_settings(DEFAULTS, {"motor_service_init": "yes"})["init"] is True


def test_links_of_every_planned_npu():
    container = {"name": "job-p0-0", "host": "h1", "role": "prefill", "job_name": "job-p0", "npu_ids": [0, 1],
                 "ports": [], "configmap_path": "/etc/pymotor/job/job-p0-0", "mounts_profile": "engine"}
    probe = {"can_talk_to_docker": True, "host_info": {"ServerVersion": "24.0"}, "images": [{"Id": "x"}],
             "npu_devices": [0, 1], "npu_health": {"0": "OK", "1": "OK"}, "npu_error": "", "links": {"0": "UP"},
             "npu_network": {"0": {"ip": "29.1.0.1", "tls": "0"}, "1": {"ip": "29.1.0.2", "tls": "0"}},
             "paths": {"/usr/local/Ascend/driver": True, "/usr/local/Ascend/driver/tools/hccn_tool": True}}
    settings = host_settings(DEFAULTS, {})
    single = {"instances": [{"job_name": "job-p0", "pods": [0]}], "containers": [container]}
    assert host_problems("h1", [container], probe, settings, single) == [
        "h1: NPU 1 link: hccn_tool -i 1 -link -g says not read (fix: check the NPU port's cabling and switch port "
        "(hccn_tool -i 1 -lldp -g), and /etc/hccn.conf)"]
    assert host_problems("h1", [container], probe, host_settings(DEFAULTS, {"motor_service_check_links": "false"}),
                         single) == []


def test_a_missing_setting_is_named():
    with pytest.raises(PrecheckError, match="motor_service_hccn_tool"):
        host_settings({k: v for k, v in DEFAULTS.items() if k != "motor_service_hccn_tool"}, {})


def test_filter_reads_probes_and_own_settings_from_hostvars(plan):
    hostvars = {"h1": {"motor_service_docker": healthy_probe(plan, "h1"), "motor_service_log_root": "/data/logs",
                       "unrelated": 1},
                "ctl": {"motor_service_docker": healthy_probe(plan, "ctl")}}
    result = motor_precheck(plan, ["h1", "ctl"], hostvars, DEFAULTS)
    assert result["problems"] == []
    by_host = judge(plan, {h: v["motor_service_docker"] for h, v in hostvars.items()},
                    {"h1": {"motor_service_log_root": "/data/logs"}})
    assert result == by_host
    assert result["parts"] != judge(plan, {h: v["motor_service_docker"] for h, v in hostvars.items()})["parts"]
    with pytest.raises(AnsibleFilterError, match="expects the output of pymotor.ascend.motor_plan"):
        motor_precheck({}, [], hostvars, DEFAULTS)


# the host's NIC and address (issue 17): judged from the interfaces motor_host_probe read
INTERFACES = {"lo": {"ipv4": ["127.0.0.1"], "ipv6": ["::1"]},
              "enp189s0f0": {"ipv4": ["10.0.0.1"], "ipv6": ["fe80::1"]},
              "enp189s0f1": {"ipv4": [], "ipv6": ["fd00::1"]}, "bond0": {"ipv4": ["192.168.1.1"], "ipv6": []}}


def with_interfaces(probe, interfaces=None):
    probe["interfaces"] = INTERFACES if interfaces is None else interfaces
    probe["default_interface"] = "enp189s0f0"


def test_a_nic_and_an_address_on_the_host_are_fine():
    hosts = dict(HOSTS, h1=dict(HOSTS["h1"], motor_nic="enp189s0f0"))
    plan = build_plan(normalize(json.loads((SEED / "user_config.json").read_text()),
                                json.loads((SEED / "env.json").read_text())), hosts)
    assert judge(plan, probes_of(plan, h1=with_interfaces))["problems"] == []
    # the same address written another way is the same address; an unreadable one does not break the check
    v6 = dict(HOSTS, h1=dict(HOSTS["h1"], motor_host_ip="fd00::1", motor_nic="enp189s0f0"))
    plan = build_plan(normalize(json.loads((SEED / "user_config.json").read_text()),
                                json.loads((SEED / "env.json").read_text())), v6)
    probe = dict(healthy_probe(plan, "h1"), interfaces={"enp189s0f0": {"ipv4": ["bogus"], "ipv6": ["FD00:0::0001"]}})
    assert host_problems("h1", [c for c in plan["containers"] if c["host"] == "h1"], probe,
                         host_settings(DEFAULTS, {}), plan) == []


def test_a_nic_the_host_lacks_is_a_problem_naming_the_interfaces_it_has(plan):
    # plan: motor_nic unset and no discovery, so eth0, which this host does not have
    problems = judge(plan, probes_of(plan, h1=with_interfaces))["problems"]
    assert problems == ["h1: nic: motor_nic eth0 is not an interface of this host (it has bond0, enp189s0f0, "
                        "enp189s0f1, lo) (fix: set motor_nic to the interface the other hosts are reached on, or leave "
                        "it unset: the plan then takes the interface of the default route)"]


def test_an_address_the_host_lacks_is_a_problem_naming_the_addresses_it_has():
    hosts = dict(HOSTS, h1=dict(HOSTS["h1"], motor_host_ip="10.0.0.7", motor_nic="bond0"))
    plan = build_plan(normalize(json.loads((SEED / "user_config.json").read_text()),
                                json.loads((SEED / "env.json").read_text())), hosts)
    problems = judge(plan, probes_of(plan, h1=with_interfaces))["problems"]
    assert problems == ["h1: host address: motor_host_ip 10.0.0.7 is not an address of this host (it has "
                        "192.168.1.1 (bond0), 10.0.0.1 (enp189s0f0), fd00::1 (enp189s0f1)) (fix: set motor_host_ip (or "
                        "ansible_host) to one of them, or leave both unset: the plan then takes the address of "
                        "motor_nic, else of the default route's interface)"]
    # only loopback: said so
    only_lo = {"lo": {"ipv4": ["127.0.0.1"]}, "bond0": {"ipv4": []}}
    problems = judge(plan, probes_of(plan, h1=lambda p: with_interfaces(p, only_lo)))["problems"]
    assert problems[0].endswith("is not an address of this host (it has no address but loopback) (fix: set "
                                "motor_host_ip (or ansible_host) to one of them, or leave both unset: the plan then "
                                "takes the address of motor_nic, else of the default route's interface)")


def test_addresses_are_not_judged_without_interfaces_or_containers(plan):
    # an older probe (no interfaces) and a host without containers are not judged
    assert judge(plan, probes_of(plan))["problems"] == []
    empty = {"containers": []}
    probe = dict(healthy_probe(plan, "h1"), interfaces=INTERFACES)
    assert host_problems("idle", [], probe, host_settings(DEFAULTS, {}), empty) == []


def test_boot_time_certificates_need_the_ca_and_script_directories_on_every_host():
    """ENABLE_GEN_CERT=true in motor_common_env: every container's boot reads CA_PATH and GEN_CERT_SCRIPT (upstream
    common.sh); a host whose probe found them missing fails the precheck, naming the variable to change."""
    user = json.loads((SEED / "user_config.json").read_text())
    env = json.loads((SEED / "env.json").read_text())
    env["motor_common_env"]["ENABLE_GEN_CERT"] = "true"
    config = normalize(user, env)
    cert_plan = build_plan(config, HOSTS)
    assert motor_plan_cert_dirs(config) == motor_plan_cert_dirs(cert_plan) == ["/mnt/cert_scripts"]

    def without(p):
        p["paths"]["/mnt/cert_scripts"] = False

    problems = judge(cert_plan, probes_of(cert_plan, ctl=without))["problems"]
    assert problems == ["ctl: certificates: /mnt/cert_scripts is missing (ENABLE_GEN_CERT=true in motor_common_env "
                        "of env.json) (fix: put the CA (CA_PATH) and openssl_gen_cert.sh (GEN_CERT_SCRIPT) there, "
                        "or turn ENABLE_GEN_CERT off)"]

    def present(p):
        p["paths"]["/mnt/cert_scripts"] = True

    assert judge(cert_plan, probes_of(cert_plan, h1=present, ctl=present))["problems"] == []
    plain = build_plan(normalize(user, json.loads((SEED / "env.json").read_text())), HOSTS)
    assert judge(plain, probes_of(plain, ctl=without))["problems"] == []  # no ENABLE_GEN_CERT: not asked for


def _as_a_user_without_become(probe):
    """What motor_host_probe reads when the connection is not root: the Docker socket refused, npu-smi and hccn_tool
    fail, the driver's directories unreadable (their paths look missing)."""
    probe.update(euid=1000, can_talk_to_docker=False, msg="permission denied on /var/run/docker.sock", host_info={},
                 images=[], npu_health={}, npu_error="npu-smi info -m failed: permission denied", links={},
                 npu_network={}, paths={p: False for p in probe["paths"]},
                 models={m: "missing" for m in probe["models"]})


def test_a_connection_without_become_is_one_problem_that_names_become(plan):
    result = judge(plan, probes_of(plan, h1=_as_a_user_without_become, ctl=_as_a_user_without_become))
    assert [p.split(":")[:2] for p in result["problems"]] == [["h1", " privileges"], ["ctl", " privileges"]]
    assert all("set become: true" in p and "ansible_become: true" in p for p in result["problems"])
    assert not any("hccn_tool" in w or "not read" in w for w in result["warnings"])
    # the same host read as root: the checks run, and each of those failures is its own problem
    as_root = judge(plan, probes_of(plan, h1=lambda p: (_as_a_user_without_become(p), p.update(euid=0))))
    assert len([p for p in as_root["problems"] if p.startswith("h1: ")]) > 10
    assert any(p.startswith("h1: NPU 0 address: hccn_tool -i 0 -ip -g has no device IP (not read)")
               for p in as_root["problems"])
