"""Bad input never reaches a host: broken user_config.json / env.json / inventory combinations through the real
``playbooks/deploy.yml`` against a simulated cluster (one 800I_A2 engine host + a control host, prefix pymotor-badin).

The cases are every case of tests/fixtures/bad_inputs/cases.yaml (its header describes the format) plus every sixth
case of tests/unit/fixtures/configs/broken_cases.yaml (all of them with MOTOR_BAD_INPUT_ALL=1): the unit suite puts
each of those through the filter already, and through deploy.yml they all end in the same validate task (a run costs
about 1.4 CPU s, mostly ansible-playbook's own start, and the suite is bound by CPU). For each one ansible-playbook
must fail in a localhost task of validate.yml or of the planning (plan.yml / roles/motor_plan, the case's stage), the
reported problems must all read ``<path>: <message> (<hint>)`` and name every path the case expects, and nothing may
have been written on the controller (no plan file, no other file in the case's directory). A validation failure runs
no task on a simulated host; before a plan failure deploy.yml reads the hosts (its read-only discovery: the role's
argument check, docker_host_info and a set_fact, ok with changed=0), and no other host task may have run. After all
cases the hosts must be unchanged: the same containers, images, volumes and networks in their dockerd (none), no
/etc/pymotor, /var/cache/pymotor or /var/log/pymotor, and no file written anywhere on their root filesystem since the
run began (directories may only show the footprint of the discovery's read-only module run: an empty Ansible
remote_tmp and the mtime of /tmp). No image is loaded into the hosts: nothing may get that far.

The cases run once for the module, as parallel ansible-playbook processes; each case then reports as its own test.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

import simctl
from ansible_collections.pymotor.ascend.tests.unit.corpus_edit import deep_merge, segments, set_path

REPO = Path(__file__).resolve().parents[2]
PREFIX = "pymotor-badin" + os.environ.get("MOTOR_SIM_PREFIX_SUFFIX", "")  # own cluster per concurrent run
VENV_BIN = Path(sys.executable).parent
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "configs"
UNIT_CORPUS = FIXTURES / "broken_cases.yaml"
CORPUS = REPO / "tests" / "fixtures" / "bad_inputs" / "cases.yaml"
DEFAULT_BASE = "seed_pd_separation"
WORKERS = 4
# An image no host has: should a case ever get past the controller, the read-only host precheck stops it.
ABSENT_IMAGE = "local/pymotor-badin:never-loaded"
MARKER = "/tmp/.pymotor-bad-input-start"
STAGE_TASKS = {
    "validate": {"Check that a configuration source is set", "Check that the configuration files exist",
                 "Normalize and validate the configuration"},
    "plan": {"Check that the inventory has PyMotor hosts", "Build the deployment plan"},
}
# deploy.yml's read-only discovery (roles/motor_service/tasks/discover.yml), run on the hosts between validation and
# planning: the only host tasks a plan-stage failure may show, and only as ok / skipping.
DISCOVERY_TASKS = {"Inspect the Docker engine, the image, the containers of the job and the host", "Record the image id"}
DISCOVERY_STATUS = {"ok", "skipping"}
# What running one read-only module (motor_host_probe) leaves on a host: Ansible's remote_tmp base, created empty, and
# the mtimes of /tmp (AnsiballZ's payload directory, removed after the run) and of the directories above remote_tmp.
# No file may be left anywhere, and remote_tmp must be empty.
ANSIBLE_FOOTPRINT = {"/root", "/root/.ansible", "/root/.ansible/tmp", "/tmp"}
# Kinds of mistakes issue 8 lists; each must have a case in tests/fixtures/bad_inputs/cases.yaml.
CATEGORIES = {"wrong_type", "missing", "typo", "npu_arithmetic", "ports", "hardware_mismatch", "malformed_json", "env",
              "inventory", "files", "combination"}
# broken_cases.yaml hands parsed documents to the filter; read from a file, a non-object document is the file's problem.
DOCUMENT_PATHS = {"user_config": "user_config.json", "env_config": "env.json"}
ENV = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
       "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".build" / "collections"),
       "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_RETRY_FILES_ENABLED": "0",
       "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}

pytestmark = pytest.mark.docker


# ------------------------------------------------------------------------------------------------------------ corpus

def load_cases() -> list[dict]:
    cases = []
    every = 1 if os.environ.get("MOTOR_BAD_INPUT_ALL") == "1" else 6
    for case in yaml.safe_load(UNIT_CORPUS.read_text(encoding="utf-8"))["cases"][::every]:
        case = dict(case, id=f"cfg-{case['name']}", stage="validate", category="config")
        if not isinstance(case.get("user", {}), dict) or not isinstance(case.get("env", {}), dict):
            case["paths"] = [DOCUMENT_PATHS.get(path, path) for path in case["paths"]]
        cases.append(case)
    for case in yaml.safe_load(CORPUS.read_text(encoding="utf-8"))["cases"]:
        cases.append(dict(case, id=case["name"]))
    return cases


CASES = load_cases()

def rename_path(document, path, new_key):
    *parents, last = segments(path)
    node = document
    for segment in parents:
        node = node[segment]
    node[new_key] = node.pop(last)


def fill(value, names: dict):
    """Replace {engine}, {control}, {engine_ip}, {control_ip}, {config_dir} in strings, recursively."""
    if isinstance(value, str):
        for key, text in names.items():
            value = value.replace("{%s}" % key, text)
        return value
    if isinstance(value, list):
        return [fill(item, names) for item in value]
    if isinstance(value, dict):
        return {key: fill(item, names) for key, item in value.items()}
    return value


def document_text(case, base: Path, kind: str) -> str:
    """The text of user_config.json (kind "user") or env.json (kind "env") for a case."""
    filename = "user_config.json" if kind == "user" else "env.json"
    text = (base / filename).read_text(encoding="utf-8")
    prefix = "" if kind == "user" else "env_"
    sets, nulls, renames = (case.get(prefix + key) or {} for key in ("set", "set_null", "rename"))
    patch = case.get("patch") if kind == "user" else None
    if kind in case or sets or nulls or renames or patch:
        document = copy.deepcopy(case[kind]) if kind in case else json.loads(text)
        for path, value in sets.items():
            set_path(document, path, value)
        for path in nulls:
            set_path(document, path, None, delete_on_none=False)
        for path, new_key in renames.items():
            rename_path(document, path, new_key)
        if patch and isinstance(document, dict):
            deep_merge(document, patch)
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    for old, new in case.get(f"{kind}_text") or []:
        assert old in text, f"{case['id']}: {old!r} is not in {filename} of {base.name}"
        text = text.replace(old, new, 1)
    return case.get(f"raw_{kind}", text)


def write_config(case, config_dir: Path) -> None:
    base = FIXTURES / case.get("base", DEFAULT_BASE)
    config_dir.mkdir()
    files = case.get("files") or {}
    for filename, kind in (("user_config.json", "user"), ("env.json", "env")):
        target = config_dir / filename
        if files.get(filename) == "directory":
            target.mkdir()
        elif files.get(filename) != "absent":
            target.write_text(document_text(case, base, kind), encoding="utf-8")


def write_inventory(case, cluster, path: Path, names: dict) -> None:
    spec = case.get("inventory") or {}
    roles = {"engine": cluster["engine"], "control": cluster["control"]}
    host_vars = {}
    for role, host in roles.items():
        hvars = {"ansible_host": host["name"], "motor_host_ip": host["ip"]}
        for key, value in (spec.get(role) or {}).items():
            if value is None:
                hvars.pop(key, None)
            else:
                hvars[key] = fill(value, names)
        host_vars[host["name"]] = hvars
    for name, hvars in (spec.get("extra_hosts") or {}).items():
        host_vars[name] = fill(hvars, names)
    groups = spec.get("groups") or {"motor_engine_hosts": ["engine"], "motor_control_hosts": ["control"]}
    children = {}
    for group, members in groups.items():
        children[group] = {"hosts": {roles[m]["name"] if m in roles else m: None for m in members}}
    inventory = {"all": {
        "vars": {"ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3",
                 "motor_nic": "eth0"},
        "hosts": host_vars,
        "children": children,
    }}
    path.write_text(yaml.safe_dump(inventory, sort_keys=False), encoding="utf-8")


def listing(folder: Path) -> list[tuple]:
    """Every path under folder with its size and modification time."""
    return sorted((str(p.relative_to(folder)), p.stat().st_size if p.is_file() else -1, p.stat().st_mtime_ns)
                  for p in folder.rglob("*"))


# ----------------------------------------------------------------------------------------------------------- running

def ansible_playbook(playbook: str, inventory: Path, variables: Path, cwd: Path) -> subprocess.CompletedProcess:
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / playbook),
            "-e", f"@{variables}"]
    return subprocess.run(argv, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300, check=False)


def run_case(case, cluster, root: Path) -> dict:
    case_dir = root / case["id"]
    case_dir.mkdir()
    config_dir = case_dir / "config"
    names = {"engine": cluster["engine"]["name"], "control": cluster["control"]["name"],
             "engine_ip": cluster["engine"]["ip"], "control_ip": cluster["control"]["ip"],
             "config_dir": str(config_dir)}
    write_config(case, config_dir)
    inventory = case_dir / "hosts.yml"
    write_inventory(case, cluster, inventory, names)
    plan_dir = case_dir / "out"
    variables = {"motor_config_dir": str(config_dir), "motor_plan_output": str(plan_dir / "plan.json"),
                 "motor_image": ABSENT_IMAGE}
    if "overrides" in case:
        variables["motor_user_config_overrides"] = case["overrides"]
    for key, value in (case.get("vars") or {}).items():
        if value is None:
            variables.pop(key, None)
        else:
            variables[key] = fill(value, names)
    vars_file = case_dir / "vars.json"
    vars_file.write_text(json.dumps(variables, indent=2), encoding="utf-8")
    before = listing(case_dir)
    started = time.monotonic()
    proc = ansible_playbook("deploy.yml", inventory, vars_file, case_dir)
    return {"rc": proc.returncode, "out": proc.stdout + proc.stderr, "seconds": time.monotonic() - started,
            "before": before, "after": listing(case_dir), "plan_dir": plan_dir, "names": names}


def host_state(name: str) -> dict:
    """What a deploy would change on a host: its dockerd's objects and the collection's directories."""
    _, docker_objects = simctl.host_exec(name, (
        "docker ps -a -q --no-trunc; echo ==; docker images -q --no-trunc; echo ==; docker volume ls -q; echo ==; "
        "docker network ls -q --no-trunc"))
    _, dirs = simctl.host_exec(name, "ls -laR --time-style=+%s /etc/pymotor /var/cache/pymotor /var/log/pymotor 2>&1")
    return {"docker": docker_objects, "dirs": dirs}


def written_since_marker(name: str) -> dict[str, list[str]]:
    """Paths on the host's root filesystem modified after the marker (the inner dockerd's volume is elsewhere):
    "all" of them, the "files" among them (anything but a directory), and what is left in Ansible's remote_tmp."""
    find = f"find / -xdev -newer {MARKER} ! -path {MARKER}"
    _, everything = simctl.host_exec(name, f"{find} 2>/dev/null")
    _, files = simctl.host_exec(name, f"{find} ! -type d 2>/dev/null")
    _, left = simctl.host_exec(name, "ls -A /root/.ansible/tmp 2>/dev/null")
    return {"all": everything.split(), "files": files.split(), "remote_tmp": left.split()}


@pytest.fixture(scope="module")
def cluster():
    simctl.down(PREFIX)
    try:
        hosts = simctl.up(1, "800I_A2", PREFIX, control=True)
        yield {"hosts": hosts, "engine": hosts[0], "control": hosts[-1]}
    finally:
        simctl.down(PREFIX)


@pytest.fixture(scope="module")
def results(cluster, tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_input")
    before = {}
    for host in cluster["hosts"]:
        before[host["name"]] = host_state(host["name"])
        # touched twice: the second touch leaves /tmp's own mtime (set when the marker was created) older than it
        rc, out = simctl.host_exec(host["name"], f"touch {MARKER} && sleep 0.05 && touch {MARKER}")
        assert rc == 0, out
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        outcomes = dict(zip([c["id"] for c in CASES],
                            pool.map(lambda case: run_case(case, cluster, root), CASES), strict=True))
    elapsed = time.monotonic() - started
    written = {h["name"]: written_since_marker(h["name"]) for h in cluster["hosts"]}
    after = {h["name"]: host_state(h["name"]) for h in cluster["hosts"]}
    print(f"\n{len(CASES)} bad-input cases through deploy.yml in {elapsed:.1f} s "
          f"({WORKERS} in parallel, slowest {max(r['seconds'] for r in outcomes.values()):.1f} s)")
    return {"cases": outcomes, "before": before, "after": after, "written": written, "root": root}


# ------------------------------------------------------------------------------------------------------- the checks

_NUMBER = re.compile(r"^\d+\. ")
_PROBLEM = re.compile(r"^(?P<path>\S+): (?P<message>.+) \((?P<hint>.+)\)$")
_HOST_RESULT = re.compile(r"^(?P<status>ok|changed|fatal|failed|skipping|unreachable|included): \[(?!localhost\])")
_TASK = re.compile(r"^TASK \[(?:[\w.]+ : )?(.+?)\] \*+$")
# the header the phase entry points print above their list (plugins/plugin_utils/entry_point.py LIST_HEADER)
_LIST_HEADER = re.compile(r"^PyMotor: (?P<count>\d+) problem\(s\) to fix, one a line as 'path: what \(fix\)':$")


def reported_problems(out: str) -> list[str] | None:
    """The problem lines of the list printed above the failed task's result (numbered, one problem a line, up to a
    blank line or the warnings), or None when no list was printed, it was printed twice, or its count is wrong."""
    lines = out.splitlines()
    starts = [i for i, line in enumerate(lines) if _LIST_HEADER.match(line)]
    if len(starts) != 1:
        return None
    problems = []
    for line in lines[starts[0] + 1:]:
        if not _NUMBER.match(line):
            break
        problems.append(_NUMBER.sub("", line))
    if len(problems) != int(_LIST_HEADER.match(lines[starts[0]]).group("count")):
        return None
    return problems


def failing_task(out: str) -> str | None:
    """The name of the task whose failure ended the run."""
    head = out.split("fatal: [localhost]: FAILED!")[0]
    tasks = [m.group(1) for m in map(_TASK.match, head.splitlines()) if m]
    return tasks[-1] if tasks else None


def host_results(out: str) -> list[tuple[str, str, str]]:
    """(task name without its role prefix, status, line) of every task result on a host other than localhost."""
    task, results = None, []
    for line in out.splitlines():
        header = _TASK.match(line)
        if header:
            task = header.group(1)
            continue
        result = _HOST_RESULT.match(line)
        if result:
            results.append((task, result.group("status"), line))
    return results


def recap(out: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP counters per host."""
    text = out.split("PLAY RECAP")[-1] if "PLAY RECAP" in out else ""
    return {host: dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", counts))
            for host, counts in re.findall(r"^(\S+)\s+: (ok=.*)$", text, re.M)}


def case_problems(case, result) -> list[str]:
    """Every way a case's run differs from 'stopped on the controller with a precise message'."""
    out, names = result["out"], result["names"]
    why = []
    if result["rc"] == 0:
        why.append("deploy.yml succeeded")
    if "Traceback (most recent call last)" in out or "Unexpected Exception" in out:
        why.append("a Python traceback")
    if "fatal: [localhost]: FAILED!" not in out:
        why.append("no localhost task failed")
    task = failing_task(out)
    if task not in STAGE_TASKS[case["stage"]]:
        why.append(f"failed in task {task!r}, expected one of {case['stage']}: {sorted(STAGE_TASKS[case['stage']])}")
    # validation failures: no host task at all; plan failures: only the read-only discovery, ok and unchanged
    allowed = DISCOVERY_TASKS if case["stage"] == "plan" else set()
    remote = [line for task, status, line in host_results(out)
              if (task or "").split(" - ")[0] not in allowed or status not in DISCOVERY_STATUS]
    counts = {host: c for host, c in recap(out).items() if host != "localhost"}
    if case["stage"] != "plan":
        touched = sorted(counts)
    else:
        touched = sorted(host for host, c in counts.items()
                         if c.get("changed") or c.get("failed") or c.get("unreachable") or c.get("rescued"))
    if remote or touched:
        why.append(f"tasks ran on hosts: {remote[:3]} recap {sorted(touched)}")
    problems = reported_problems(out)
    if problems is None:
        why.append("no problem list printed once above the failure")
        problems = []
    for line in problems:
        if not _PROBLEM.match(line):
            why.append(f"not '<path>: <message> (<hint>)': {line!r}")
    reported_paths = [line.split(": ", 1)[0] for line in problems]
    for path in fill(case["paths"], names):
        if path not in reported_paths:
            why.append(f"no problem names {path!r} (reported: {reported_paths})")
    for path in fill(case.get("absent") or [], names):
        if path in reported_paths:
            why.append(f"{path!r} reported although an earlier stage failed")
    text = " ".join(" ".join(problems).split())
    for expected in fill(case.get("contains") or [], names):
        if " ".join(expected.split()) not in text:
            why.append(f"{expected!r} not in the problems")
    if result["plan_dir"].exists():
        why.append(f"the plan output {result['plan_dir']} was written")
    if result["after"] != result["before"]:
        changed = sorted(set(result["after"]) ^ set(result["before"]))
        why.append(f"files changed in the case directory: {changed}")
    return why


def test_corpus_covers_issue_8():
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    assert len(CASES) >= 80
    own = [case for case in CASES if not case["id"].startswith("cfg-")]
    assert CATEGORIES <= {case["category"] for case in own}, CATEGORIES - {case["category"] for case in own}
    for case in own:
        assert case["stage"] in STAGE_TASKS and case["paths"], case["name"]
    malformed = [case for case in CASES if case.get("category") == "malformed_json" or "raw_user" in case
                 or "raw_env" in case]
    assert len(malformed) >= 10


def test_the_unbroken_base_plans_on_the_cluster(cluster, results):
    """Control: the base configuration and inventory plan fine, so each case fails because of its own change."""
    case = {"id": "baseline"}
    case_dir = results["root"] / "baseline"
    case_dir.mkdir()
    write_config(case, case_dir / "config")
    names = {"engine": cluster["engine"]["name"], "control": cluster["control"]["name"]}
    write_inventory(case, cluster, case_dir / "hosts.yml", names)
    variables = case_dir / "vars.json"
    variables.write_text(json.dumps({"motor_config_dir": str(case_dir / "config"),
                                     "motor_plan_output": str(case_dir / "out" / "plan.json")}), encoding="utf-8")
    proc = ansible_playbook("plan.yml", case_dir / "hosts.yml", variables, case_dir)
    assert proc.returncode == 0, proc.stdout[-4000:]
    plan = json.loads((case_dir / "out" / "plan.json").read_text(encoding="utf-8"))
    assert len(plan["containers"]) == 7


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_bad_input_stops_on_the_controller(case, results):
    result = results["cases"][case["id"]]
    why = case_problems(case, result)
    assert not why, (f"case {case['id']} ({case.get('category')}): " + "; ".join(why)
                     + f"\n--- ansible-playbook output (rc {result['rc']}) ---\n{result['out'][-5000:]}")


def test_no_host_was_touched(cluster, results):
    for host in cluster["hosts"]:
        name = host["name"]
        written = results["written"][name]
        assert written["files"] == [], f"files written on {name}: {written['files'][:20]}"
        beyond = sorted(set(written["all"]) - ANSIBLE_FOOTPRINT)
        assert beyond == [], f"paths changed on {name} beyond the discovery's module run: {beyond[:20]}"
        assert written["remote_tmp"] == [], f"left in /root/.ansible/tmp on {name}: {written['remote_tmp']}"
        assert results["after"][name] == results["before"][name], f"{name} changed"
        state = results["after"][name]
        containers, images = state["docker"].split("==")[:2]
        assert containers.split() == [] and images.split() == [], f"{name} has containers or images:\n{state['docker']}"
        assert state["dirs"].count("No such file or directory") == 3, f"{name}:\n{state['dirs']}"
