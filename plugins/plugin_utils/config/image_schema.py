# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The key lists the validation checks against: the built-in ones (``config/known_keys.py``), or those read from the
image being deployed (a key schema stored per image id on the controller by ``build_image.yml`` / ``schema.yml``).

Pure Python: the files are read by the caller (the action ``motor_validate``); this module names them, checks what
they hold and merges the image's lists onto the built-in ones. From the image come PyMotor's config sections and the
fields of its config classes, the vLLM and SGLang argument names when those import there. The deployer's own keys
(top level, ``motor_deploy_config``, engine sections), env.json's sections, the conductor's and the KV pool's keys are
not part of the ``motor`` package and stay the built-in lists, as do the sections PyMotor's loaders read that are not
dataclass fields (the coordinator's free-form ``aigw``).
"""

from __future__ import annotations

import hashlib
import json
import posixpath

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config import known_keys
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import Problem

SCHEMA_FORMAT = 1  # plugins/module_utils/motor_key_schema.py writes it
# on the controller (motor_key_schema_dir; the role image_schema's default is the same)
DEFAULT_SCHEMA_DIR = "~/.cache/pymotor-ascend/schemas"
TOP_SECTIONS = ("motor_controller_config", "motor_coordinator_config", "motor_nodemanger_config")


class KeySchemaError(Exception):
    """A stored key schema that cannot be used (``.problem`` names the file)."""

    def __init__(self, problem):
        super().__init__(problem.message)
        self.problem = problem


class KeyLists:
    """The lists of known keys and where each came from (``source``: (origin named in messages, who else may read a
    key the list lacks; None when the list is the deployed image's own))."""

    def __init__(self, **lists):
        self.pymotor = lists["pymotor"]
        self.class_fields = lists["class_fields"]
        self.sections = lists["sections"]
        self.nested_fields = lists["nested_fields"]
        self.vllm = lists["vllm"]
        self.vllm_keys = frozenset(lists["vllm_keys"])
        self.sglang = lists.get("sglang")
        self.sglang_keys = frozenset(lists["sglang_keys"]) if lists.get("sglang_keys") is not None else None
        self.checked = lists["checked"]


def builtin_lists():
    """The built-in lists (known_keys.py), each named with the upstream commit it was read from."""
    return KeyLists(
        pymotor=known_keys.PYMOTOR, class_fields=known_keys.CLASS_FIELDS,
        sections={"motor_controller_config": known_keys.CONTROLLER_SECTIONS,
                  "motor_coordinator_config": known_keys.COORDINATOR_SECTIONS,
                  "motor_nodemanger_config": known_keys.NODE_MANAGER_SECTIONS},
        nested_fields=known_keys.NESTED_FIELDS, vllm=known_keys.VLLM, vllm_keys=known_keys.VLLM_KEYS,
        checked="keys checked against the built-in lists (%s, %s)" % (known_keys.PYMOTOR[0], known_keys.VLLM[0]))


BUILTIN = builtin_lists()


def schema_file(schema_dir, image_id):
    """Where the key schema of an image id is stored (``<dir>/<hex id>.json``)."""
    return posixpath.join(schema_dir, "%s.json" % str(image_id).rsplit(":", 1)[-1])


def tag_file(schema_dir, image):
    """Where the image id of an image name (``name:tag``, as in motor_image) is recorded."""
    return posixpath.join(schema_dir, "tags", "%s.json" % hashlib.sha256(str(image).encode("utf-8")).hexdigest())


def _problem(path, message, hint="run playbooks/schema.yml for the image again, or remove the file"):
    return KeySchemaError(Problem(path, message, hint))


def _string_lists(value):
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def image_id_of(tag_text, image, path):
    """The image id recorded for ``image`` in the text of its tag file."""
    try:
        record = json.loads(tag_text)
    except ValueError as exc:
        raise _problem(path, "unreadable tag record of %s: %s" % (image, exc))
    if not isinstance(record, dict) or record.get("image") != image or not isinstance(record.get("image_id"), str):
        raise _problem(path, "not a tag record of %s" % image)
    return record["image_id"]


def read_record(text, image_id, path):
    """The stored record of an image id (``image_id``, ``image``, ``schema``: the script's output), checked."""
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise _problem(path, "unreadable key schema: %s" % exc)
    schema = record.get("schema") if isinstance(record, dict) else None
    if not isinstance(schema, dict) or record.get("image_id") != image_id:
        raise _problem(path, "not the key schema of image %s" % image_id)
    if schema.get("format") != SCHEMA_FORMAT:
        raise _problem(path, "key schema format %r, this collection reads %d" % (schema.get("format"), SCHEMA_FORMAT))
    pymotor = schema.get("pymotor")
    if pymotor is not None:
        classes, sections = pymotor.get("classes"), pymotor.get("sections")
        if not (isinstance(classes, dict) and all(_string_lists(v) for v in classes.values())
                and isinstance(sections, dict) and all(isinstance(v, dict) for v in sections.values())):
            raise _problem(path, "the PyMotor part of the key schema is malformed")
    for part, key in (("vllm", "engine_args"), ("sglang", "server_args")):
        if schema.get(part) is not None and not _string_lists((schema[part] or {}).get(key)):
            raise _problem(path, "the %s part of the key schema is malformed" % part)
    return record


def _short_id(image_id):
    return str(image_id).rsplit(":", 1)[-1][:12]


def image_lists(record, image):
    """The lists of ``image`` from its stored record, merged onto the built-in ones (a part the image did not give
    stays built-in and is named so in ``checked``)."""
    schema, where = record["schema"], "%s (%s)" % (image, _short_id(record["image_id"]))
    lists = dict(vars(BUILTIN))
    lists["vllm_keys"], lists["sglang_keys"] = BUILTIN.vllm_keys, None
    said = []
    pymotor = schema.get("pymotor")
    if pymotor:
        name = "PyMotor %s of %s" % (pymotor.get("version") or "unknown", where)
        lists["pymotor"] = (name, None)
        lists["class_fields"] = dict(known_keys.CLASS_FIELDS, **pymotor["classes"])
        lists["sections"] = {
            # the loaders' free-form sections are no dataclass fields (coordinator.py:463 'aigw'): kept from the list
            top: dict({k: v for k, v in BUILTIN.sections[top].items() if v is None}, **pymotor["sections"][top])
            if top in pymotor["sections"] else BUILTIN.sections[top] for top in TOP_SECTIONS}
        lists["nested_fields"] = dict((tuple(key.rsplit(".", 1)), value)
                                      for key, value in (pymotor.get("nested") or {}).items())
        said.append(name)
    else:
        said.append("the built-in PyMotor list (%s; the image's motor did not import)" % known_keys.PYMOTOR[0])
    vllm = schema.get("vllm")
    if vllm:
        name = "vLLM %s of %s" % (vllm.get("version") or "unknown", where)
        # without the serve parser's names (it did not build in the image) the built-in frontend and serve flags
        cli = vllm.get("cli_args") if _string_lists(vllm.get("cli_args")) else (
            known_keys.VLLM_FRONTEND_ARGS + known_keys.VLLM_SERVE_ARGS)
        lists["vllm"] = (name, None)
        lists["vllm_keys"] = frozenset(vllm["engine_args"]) | frozenset(cli) | frozenset(known_keys.PYMOTOR_VLLM_KEYS)
        said.append(name)
    else:
        said.append("the built-in vLLM list (%s; no vLLM in the image)" % known_keys.VLLM[0])
    sglang = schema.get("sglang")
    if sglang:
        lists["sglang"] = ("SGLang %s of %s" % (sglang.get("version") or "unknown", where), None)
        lists["sglang_keys"] = frozenset(sglang["server_args"])
        said.append(lists["sglang"][0])
    lists["checked"] = "keys checked against " + ", ".join(said)
    return KeyLists(**lists)
