# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Drift of config/known_keys.py against the upstream sources in ../shared/upstream (MOTOR_UPSTREAM_PYMOTOR,
MOTOR_UPSTREAM_MOONCAKE override): PyMotor's dataclass fields and the line each is cited at, the sections each
loader reads, the conductor's JSON tags, the vllm-ascend version of PyMotor's image. Skipped when the trees are
absent."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config import known_keys

REPO = Path(__file__).resolve().parents[4]
KNOWN_KEYS_SOURCE = REPO / "plugins" / "plugin_utils" / "config" / "known_keys.py"


def upstream(name: str) -> Path:
    override = os.environ.get("MOTOR_UPSTREAM_%s" % name.upper())
    if override:
        return Path(override)
    for base in (REPO.parent, REPO.parent.parent):  # ../shared from a clone, ../../shared from a worktree
        candidate = base / "shared" / "upstream" / name
        if candidate.is_dir():
            return candidate
    return REPO.parent / "shared" / "upstream" / name


PYMOTOR = upstream("pymotor")
MOONCAKE = upstream("mooncake")
pytestmark = pytest.mark.skipif(not (PYMOTOR / "motor" / "config").is_dir(),
                                reason="upstream PyMotor not found at %s (set MOTOR_UPSTREAM_PYMOTOR)" % PYMOTOR)


# Classes of CLASS_FIELDS outside motor/config: their module's path under motor/
MODULE_PATHS = {"instance": "common/resources/instance.py"}


def module_path(name):
    return "motor/" + MODULE_PATHS.get(name, "config/%s.py" % name)


def module(name):
    return ast.parse((PYMOTOR / module_path(name)).read_text(encoding="utf-8"))


def classes(name):
    return {node.name: node for node in module(name).body if isinstance(node, ast.ClassDef)}


def dataclass_fields(node):
    """name -> annotation text of each field a JSON key can set (``field(init=False)`` ones are internal)."""
    out = {}
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        value = stmt.value
        if isinstance(value, ast.Call) and any(k.arg == "init" and isinstance(k.value, ast.Constant)
                                               and k.value.value is False for k in value.keywords):
            continue
        out[stmt.target.id] = ast.unparse(stmt.annotation)
    return out


def annotated_class(annotation):
    """The class an annotation names ("TLSConfig | None" -> TLSConfig)."""
    return annotation.split("|")[0].strip()


def method(cls_node, name):
    return next(node for node in cls_node.body if isinstance(node, ast.FunctionDef) and node.name == name)


def constants(tree):
    return {node.targets[0].id: node.value.value for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}


def sections_tested_in(func, names):
    """Keys of ``'<key>' in cfg`` tests in a loader (a module constant resolved through ``names``)."""
    found = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In) and \
                isinstance(node.comparators[0], ast.Name) and node.comparators[0].id == "cfg":
            left = node.left
            if isinstance(left, ast.Constant):
                found.add(left.value)
            elif isinstance(left, ast.Name) and left.id in names:
                found.add(names[left.id])
    return found


@pytest.mark.parametrize("qualified", sorted(known_keys.CLASS_FIELDS))
def test_class_fields_match_upstream(qualified):
    mod, cls = qualified.split(".")
    node = classes(mod)[cls]
    assert set(known_keys.CLASS_FIELDS[qualified]) == set(dataclass_fields(node)) | kwargs_read(node), qualified
    cited = re.search(r"# %s:(\d+)[^\n]*\n    \"%s\"" % (re.escape(module_path(mod)), re.escape(qualified)),
                      KNOWN_KEYS_SOURCE.read_text(encoding="utf-8"))
    assert cited and int(cited.group(1)) == node.lineno, "%s: cite %s:%d" % (qualified, module_path(mod), node.lineno)


def kwargs_read(node):
    """Keys a class's ``__init__`` reads from ``**kwargs`` (``kwargs.get('<key>', ...)``)."""
    init = next((stmt for stmt in node.body if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__"), None)
    return {call.args[0].value for call in ast.walk(init) if init is not None and isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute) and call.func.attr == "get"
            and isinstance(call.func.value, ast.Name) and call.func.value.id == "kwargs"
            and call.args and isinstance(call.args[0], ast.Constant)} if init is not None else set()


@pytest.mark.parametrize("mod, root, loader, ours", [
    ("controller", "ControllerConfig", "from_json", known_keys.CONTROLLER_SECTIONS),
    ("node_manager", "NodeManagerConfig", "_update_from_config_data", known_keys.NODE_MANAGER_SECTIONS),
])
def test_sections_each_loader_reads(mod, root, loader, ours):
    tree = module(mod)
    cls_nodes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    read = sections_tested_in(method(cls_nodes[root], loader), constants(tree))
    assert set(ours) == read
    fields = dataclass_fields(cls_nodes[root])
    for section, qualified in ours.items():
        assert annotated_class(fields[section]) == qualified.split(".")[1], section


def test_coordinator_sections():
    tree = module("coordinator")
    root = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "CoordinatorConfig")
    mappings = next(node.value for node in ast.walk(method(root, "from_json"))
                    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "config_mappings")
    read = {element.elts[0].value for element in mappings.elts}
    read |= {"aigw"} & sections_tested_in(method(root, "from_json"), {})  # copied as a free-form object
    assert set(known_keys.COORDINATOR_SECTIONS) == read
    fields = dataclass_fields(root)
    for section, qualified in known_keys.COORDINATOR_SECTIONS.items():
        if qualified:
            assert annotated_class(fields[section]) == qualified.split(".")[1], section


def test_parallel_config_of_basic_config():
    fields = dataclass_fields(classes("node_manager")["BasicConfig"])
    assert annotated_class(fields["parallel_config"]) == "ParallelConfig"
    # the ParallelConfig node_manager.py imports: from motor.common.resources.instance
    imported = next(node for node in module("node_manager").body if isinstance(node, ast.ImportFrom)
                    and "ParallelConfig" in [alias.name for alias in node.names])
    assert imported.module == "motor.common.resources.instance"
    assert known_keys.NESTED_FIELDS == {("node_manager.BasicConfig", "parallel_config"): "instance.ParallelConfig"}


@pytest.mark.skipif(not (MOONCAKE / "mooncake-conductor").is_dir(), reason="upstream Mooncake not found")
def test_conductor_keys():
    text = (MOONCAKE / "mooncake-conductor" / "conductor-ctrl" / "main.go").read_text(encoding="utf-8")
    structs = re.findall(r"type (\w+) struct \{(.*?)\n\}", text, re.S)
    tags = {name: re.findall(r'json:"(\w+)"', body) for name, body in structs}
    config = next(keys for keys in tags.values() if "kvevent_instance" in keys)
    service = next(keys for keys in tags.values() if "replay_endpoint" in keys)
    assert set(known_keys.CONDUCTOR_KEYS) == set(config)
    assert set(known_keys.CONDUCTOR_SERVICE_KEYS) == set(service)


def test_vllm_ascend_version_of_the_image():
    overview = (PYMOTOR / "docker" / "OVERVIEW.md").read_text(encoding="utf-8")
    version = re.search(r"`vllm-ascend version` \| `(v[\d.]+)`", overview).group(1)
    assert "vllm-ascend %s" % version in KNOWN_KEYS_SOURCE.read_text(encoding="utf-8"), (
        "PyMotor's image moved to vllm-ascend %s: review VLLM_ENGINE_ARGS against that vLLM" % version)
