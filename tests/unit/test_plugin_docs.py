# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""ansible-doc on every plugin of the collection: each filter, module and role shows its own documentation (its own
name, a short description no other plugin has, options, examples and RETURN samples), not another plugin's, and
every public filter has one. The filters are what the FilterModule classes export; the modules and roles are the
files on disk, so that a plugin ansible-doc does not list fails too. No Docker needed."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.tests.unit.ansible_cli import ansible_env

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
COLLECTION = "pymotor.ascend"


def ansible_doc(*args: str) -> str:
    env = ansible_env()
    proc = subprocess.run([str(BIN / "ansible-doc"), *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "[WARNING]" not in proc.stderr and "[ERROR]" not in proc.stderr, proc.stderr[-2000:]
    return proc.stdout


def public_filters() -> set[str]:
    """The filter names the collection's FilterModule classes export."""
    names = set()
    for path in sorted((REPO / "plugins" / "filter").glob("*.py")):
        module = importlib.import_module(f"ansible_collections.pymotor.ascend.plugins.filter.{path.stem}")
        names |= set(module.FilterModule().filters())
    return names


def on_disk(kind: str) -> set[str]:
    if kind == "module":
        return {p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__"}
    if kind == "role":
        return {p.parent.parent.name for p in (REPO / "roles").glob("*/meta/argument_specs.yml")}
    return public_filters()


@pytest.fixture(scope="module", params=["filter", "module", "role"])
def docs(request):
    kind = request.param
    listed = json.loads(ansible_doc("-t", kind, "-l", "--json", COLLECTION))
    names = sorted(on_disk(kind))
    assert names, f"no {kind} found on disk"
    return kind, names, listed, json.loads(ansible_doc("-t", kind, "--json", *[f"{COLLECTION}.{n}" for n in names]))


def test_ansible_doc_lists_every_plugin_and_no_other(docs):
    kind, names, listed = docs[:3]
    assert sorted(name.split(".")[-1] for name in listed) == names
    if kind != "role":
        undocumented = sorted(name for name, description in listed.items() if description == "UNDOCUMENTED")
        assert not undocumented, f"undocumented {kind}s: {undocumented}"


def test_every_plugin_shows_its_own_documentation(docs):
    kind, names, shown = docs[0], docs[1], docs[3]
    assert sorted(shown) == [f"{COLLECTION}.{n}" for n in names]
    descriptions = {}
    for fqcn, data in shown.items():
        short = fqcn.split(".")[-1]
        if kind == "role":
            main = data["entry_points"]["main"]
            assert main["short_description"], fqcn
            descriptions.setdefault(main["short_description"], []).append(fqcn)
            continue
        doc = data["doc"]
        own_name = doc.get("module" if kind == "module" else "name")
        assert own_name == short, f"{fqcn} shows the docs of {own_name}"
        assert doc["collection"] == COLLECTION and doc["short_description"], fqcn
        assert Path(doc["filename"]).stem == short, f"{fqcn} reads its docs from {doc['filename']}"
        descriptions.setdefault(doc["short_description"], []).append(fqcn)
        assert data["examples"] and f"{COLLECTION}.{short}" in data["examples"], f"{fqcn}: examples do not use it"
        assert data["return"], f"{fqcn}: no RETURN"
        if kind == "filter":
            assert "_input" in doc["options"] and "_value" in data["return"], fqcn
            assert data["return"]["_value"].get("sample") is not None, f"{fqcn}: RETURN has no sample"
    shared = {text: fqcns for text, fqcns in descriptions.items() if len(fqcns) > 1}
    assert not shared, f"{kind}s sharing a short description: {shared}"


def test_text_output_of_a_companion_filter_is_its_own():
    """The human form: the companion filters of one Python file each show their own file and options."""
    text = ansible_doc("-t", "filter", f"{COLLECTION}.motor_ops_mask_text")
    assert text.splitlines()[0].startswith(f"> FILTER {COLLECTION}.motor_ops_mask_text (")
    assert "motor_ops_mask_text.yml)" in text.splitlines()[0]
    assert "Free text" in text and "Judge the observations" not in text


# The plugins a site's own playbooks may use; every other module and filter serves the collection's playbooks and
# roles, and says so where ansible-doc -l lists it.
PUBLIC = {"module": {"motor_validate", "motor_host_probe", "motor_job_info", "motor_wait", "motor_show"},
          "filter": {"motor_config", "motor_plan", "motor_plan_table", "motor_ops_mask", "motor_ops_mask_document",
                     "motor_ops_mask_text"}}


def test_internal_plugins_say_so_in_the_list_and_in_their_documentation(docs):
    kind, names, listed, shown = docs
    if kind == "role":
        return
    internal = [n for n in names if n not in PUBLIC[kind]]
    assert internal and set(PUBLIC[kind]) <= set(names)
    for name in names:
        fqcn = f"{COLLECTION}.{name}"
        says = listed[fqcn].startswith("Internal - ")
        assert says == (name in internal), (fqcn, listed[fqcn])
        first = shown[fqcn]["doc"]["description"][0]
        assert ("not a public interface" in first) == (name in internal), (fqcn, first)
