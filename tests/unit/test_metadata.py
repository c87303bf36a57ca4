# -*- coding: utf-8 -*-
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Collection metadata agrees with itself: licences, one minimum Ansible version, action_groups, the EE definition."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
GALAXY = REPO / "galaxy.yml"
HEADERS = {"Apache License 2.0": "Apache-2.0", "GNU General Public License v3.0+": "GPL-3.0-or-later"}
LICENCE_OPENINGS = {"Apache-2.0": ("Apache License", "Version 2.0, January 2004"),
                    "GPL-3.0-or-later": ("GNU GENERAL PUBLIC LICENSE", "Version 3, 29 June 2007")}

pytestmark = pytest.mark.skipif(not GALAXY.is_file(), reason="galaxy.yml only exists in a source checkout")


def load(path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def minimum_ansible():
    spec = load(REPO / "meta" / "runtime.yml")["requires_ansible"]
    match = re.fullmatch(r">=(\d+)\.(\d+)\.0", spec)
    assert match, f"requires_ansible {spec!r} is not of the form >=X.Y.0"
    return f"{match.group(1)}.{match.group(2)}"


def test_licences_match_galaxy():
    names = load(GALAXY)["license"]
    assert sorted(path.stem for path in (REPO / "LICENSES").glob("*.txt")) == sorted(names)
    for name in names:
        text = (REPO / "LICENSES" / f"{name}.txt").read_text(encoding="utf-8")
        opening = [line.strip() for line in text.splitlines() if line.strip()][:2]
        assert tuple(opening) == LICENCE_OPENINGS[name], opening
        assert "END OF TERMS AND CONDITIONS" in text and len(text) > 10000


def terms(text):
    """The licence terms, whitespace-normalized (copies differ in the appendix and http/https links)."""
    body = text[text.index("TERMS AND CONDITIONS"):text.index("END OF TERMS AND CONDITIONS")]
    return " ".join(body.replace("https://", "http://").split())


def test_licence_texts_equal_an_independent_copy():
    ansible_collections = pytest.importorskip("ansible_collections.community.docker")
    theirs = Path(list(ansible_collections.__path__)[0]) / "LICENSES"
    if not theirs.is_dir():
        pytest.skip("community.docker ships no LICENSES directory here")
    for name in load(GALAXY)["license"]:
        other = theirs / f"{name}.txt"
        if other.is_file():
            assert terms((REPO / "LICENSES" / f"{name}.txt").read_text(encoding="utf-8")) == \
                terms(other.read_text(encoding="utf-8")), name


def test_every_file_licence_is_named_in_galaxy():
    names = set(load(GALAXY)["license"])
    seen = set()
    for path in list(REPO.glob("plugins/**/*.py")) + list(REPO.glob("roles/**/*.py")) + list(REPO.glob("tests/unit/**/*.py")):
        head = "\n".join(path.read_text(encoding="utf-8").splitlines()[:6])
        seen.update(spdx for spdx in re.findall(r"SPDX-License-Identifier: (\S+)", head))
        seen.update(spdx for header, spdx in HEADERS.items() if header in head)
    assert seen and seen <= names, seen - names


def test_galaxy_names_no_placeholder_url():
    galaxy = load(GALAXY)
    for key in ("repository", "documentation", "homepage", "issues"):
        value = galaxy.get(key)
        if value is not None:
            assert value.startswith("https://") and not re.search(r"example\.(invalid|com|org)|placeholder", value), value
    assert "example.invalid" not in GALAXY.read_text(encoding="utf-8")


def test_action_group_lists_every_module():
    groups = load(REPO / "meta" / "runtime.yml")["action_groups"]
    modules = sorted(path.stem for path in (REPO / "plugins" / "modules").glob("*.py") if path.stem != "__init__")
    assert sorted(groups["motor"]) == modules
    actions = {path.stem for path in (REPO / "plugins" / "action").glob("*.py") if path.stem != "__init__"}
    assert actions <= set(modules), actions - set(modules)


def test_one_minimum_ansible_version_everywhere():
    minimum = minimum_ansible()
    roles = {path.parent.parent.name: str(load(path)["galaxy_info"]["min_ansible_version"])
             for path in (REPO / "roles").glob("*/meta/main.yml")}
    assert roles and set(roles.values()) == {minimum}, roles
    readme = re.findall(r"ansible-core (\d+\.\d+) or later", (REPO / "README.md").read_text(encoding="utf-8"))
    assert readme and set(readme) == {minimum}, readme
    ee_core = load(REPO / "execution-environment.yml")["dependencies"]["ansible_core"]["package_pip"]
    assert re.fullmatch(rf"ansible-core=={re.escape(minimum)}\.\d+", ee_core), ee_core
    requirements = REPO / "requirements.txt"
    if requirements.is_file():  # the tested version is on the minimum line, and the EE builds with it
        pin = re.search(r"^ansible-core==(\S+)$", requirements.read_text(encoding="utf-8"), re.M).group(1)
        assert pin.rsplit(".", 1)[0] == minimum and ee_core == f"ansible-core=={pin}", (pin, ee_core)
    from ansible.release import __version__ as running  # pylint: disable=import-outside-toplevel
    assert tuple(int(part) for part in running.split(".")[:2]) >= tuple(int(part) for part in minimum.split("."))


def test_execution_environment_definition_matches_the_collection():
    galaxy = load(GALAXY)
    ee_def = load(REPO / "execution-environment.yml")
    assert ee_def["version"] == 3
    tarball = f"{galaxy['namespace']}-{galaxy['name']}-{galaxy['version']}.tar.gz"
    assert ee_def["dependencies"]["galaxy"]["collections"] == [{"name": f"collections/{tarball}", "type": "file"}]
    assert [(Path(entry["src"]).name, entry["dest"]) for entry in ee_def["additional_build_files"]] == \
        [(tarball, "collections")]
    collection_ee = load(REPO / "meta" / "execution-environment.yml")
    assert ee_def["dependencies"]["system"] == collection_ee["dependencies"]["system"]
    assert (REPO / collection_ee["dependencies"]["system"]).is_file()
    # Python: the controller side uses the standard library and ansible-core only (community.docker declares its own).
    assert "python" not in collection_ee["dependencies"]
