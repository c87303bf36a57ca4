# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Key lists read from the image being deployed (issue 45, build 1): the script run in the image (here on packages
laid out like PyMotor's and vLLM's), the stored record read back, merged onto the built-in lists, and the one
unknown-key rule applied with them; the controller-side lookup of the action by image name."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ansible_collections.pymotor.ascend.plugins.action.motor_validate import key_lists
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_key_schema import SCRIPT, parse_output
from ansible_collections.pymotor.ascend.plugins.modules.motor_image_schema import summary
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config import known_keys
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import Context, MotorConfigError
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.image_schema import (
    BUILTIN,
    KeySchemaError,
    image_lists,
    read_record,
    schema_file,
    tag_file,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.strict import check_sglang_keys

REPO = Path(__file__).resolve().parents[4]
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "configs"
IMAGE, IMAGE_ID = "local/pymotor:9", "sha256:" + "ab" * 32
CTRL, P = "motor_controller_config", "motor_engine_prefill_config"

FAKE_PACKAGES = {
    "motor/__init__.py": "__version__ = '9.9.9'\n",
    "motor/config/__init__.py": "",
    "motor/config/log_config.py": """
        from dataclasses import dataclass
        @dataclass
        class LoggingConfig:
            log_level: str = "INFO"
        """,
    "motor/config/controller.py": """
        from dataclasses import dataclass, field
        from motor.config.log_config import LoggingConfig
        @dataclass
        class ApiConfig:
            controller_api_port: int = 1026
            controller_api_brand_new: int = 0
        @dataclass
        class ControllerConfig:
            logging_config: LoggingConfig = field(default_factory=LoggingConfig)
            api_config: ApiConfig = field(default_factory=ApiConfig)
            config_path: str = field(default="", init=False)
            plain_value: int = 0
        """,
    "motor/config/coordinator.py": """
        from dataclasses import dataclass, field
        @dataclass
        class SchedulerConfig:
            scheduler_type: str = "load_balance"
        @dataclass
        class CoordinatorConfig:
            scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig)
            aigw_model: dict = None
        """,
    # node_manager's ParallelConfig is a pydantic model in PyMotor (motor/common/resources/instance.py:74)
    "motor/common/__init__.py": "",
    "motor/common/instance.py": """
        class FieldInfo:
            default_factory = None
        class ParallelConfig:
            model_fields = {"dp_size": FieldInfo(), "ep_size": FieldInfo()}
        """,
    "motor/config/node_manager.py": """
        from dataclasses import dataclass, field
        from motor.common.instance import ParallelConfig
        @dataclass
        class BasicConfig:
            job_name: str = ""
            parallel_config: ParallelConfig = field(default_factory=ParallelConfig)
        @dataclass
        class NodeManagerConfig:
            basic_config: BasicConfig = field(default_factory=BasicConfig)
        """,
    "motor/config/broken.py": "import not_in_this_image\n",
    "vllm/__init__.py": "__version__ = '0.99.0'\nprint('INFO vllm platform detected')\n",
    "vllm/engine/__init__.py": "",
    "vllm/engine/arg_utils.py": """
        import dataclasses
        EngineArgs = dataclasses.make_dataclass("EngineArgs", [(n, int, 0) for n in NAMES])
        """,
}


def lay_out(root):
    for name, text in FAKE_PACKAGES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = textwrap.dedent(text)
        if name == "vllm/engine/arg_utils.py":
            text = "NAMES = %r\n" % (list(known_keys.VLLM_ENGINE_ARGS) + ["brand_new_arg"]) + text
        path.write_text(text, encoding="utf-8")


def run_script(root):
    proc = subprocess.run([sys.executable, "-S", "-c", SCRIPT], cwd=root, env={"PYTHONPATH": str(root)},
                          capture_output=True, text=True, timeout=60, check=True)
    return parse_output(proc.stdout)


def test_the_script_reads_pymotor_classes_and_vllm_args_and_leaves_out_what_does_not_import(tmp_path):
    lay_out(tmp_path)
    schema = run_script(tmp_path)  # vllm prints before the schema line: the last JSON line is taken
    pymotor = schema["pymotor"]
    assert pymotor["version"] == "9.9.9"
    assert pymotor["sections"] == {
        "motor_controller_config": {"logging_config": "log_config.LoggingConfig", "api_config": "controller.ApiConfig"},
        "motor_coordinator_config": {"scheduler_config": "coordinator.SchedulerConfig"},
        "motor_nodemanger_config": {"basic_config": "node_manager.BasicConfig"}}
    assert pymotor["classes"]["controller.ApiConfig"] == ["controller_api_brand_new", "controller_api_port"]
    assert "config_path" not in pymotor["classes"]["controller.ControllerConfig"]  # init=False: not from JSON
    assert pymotor["nested"]["node_manager.BasicConfig.parallel_config"] == "instance.ParallelConfig"
    assert pymotor["classes"]["instance.ParallelConfig"] == ["dp_size", "ep_size"]
    assert "ModuleNotFoundError" in pymotor["skipped"]["motor.config.broken"]
    assert schema["vllm"]["version"] == "0.99.0" and "brand_new_arg" in schema["vllm"]["engine_args"]
    assert schema["vllm"]["cli_args"] is None and "vllm.cli_args" in schema["errors"]  # no serve parser here
    assert schema["sglang"] is None and "No module named 'sglang'" in schema["errors"]["sglang"]
    lines = summary(schema)
    assert "  PyMotor 9.9.9: 4 sections, 8 config classes" in lines
    assert any(line.startswith("  sglang not read (ModuleNotFoundError") for line in lines)


def test_no_schema_printed_is_an_error():
    with pytest.raises(ValueError, match="printed no key schema"):
        parse_output("Traceback (most recent call last):\n  ...\nImportError: boom\n")


def builtin_like_record(extra_classes=None, vllm=None, version="1.2.3"):
    """A stored record whose PyMotor part is the built-in lists plus ``extra_classes`` (an image of a PyMotor close
    to the one the lists were read from)."""
    classes = {cls: list(fields) for cls, fields in known_keys.CLASS_FIELDS.items()}
    for cls, fields in (extra_classes or {}).items():
        classes[cls] = classes.get(cls, []) + fields
    sections = {top: {k: v for k, v in BUILTIN.sections[top].items() if v} for top in BUILTIN.sections}
    nested = {"%s.%s" % key: value for key, value in known_keys.NESTED_FIELDS.items()}
    return {"image_id": IMAGE_ID, "schema": {
        "format": 1, "pymotor": {"version": version, "classes": classes, "sections": sections, "nested": nested},
        "vllm": vllm, "sglang": None, "errors": {}}}


def load(name):
    folder = FIXTURES / name
    return (json.loads((folder / "user_config.json").read_text(encoding="utf-8")),
            json.loads((folder / "env.json").read_text(encoding="utf-8")))


def problems(user, env, overrides, keys, unknown_keys="warn"):
    """(errors, warnings) as formatted strings."""
    try:
        config = normalize(copy.deepcopy(user), env, overrides, unknown_keys, keys)
    except MotorConfigError as err:
        return [str(p) for p in err.problems], [str(w) for w in err.warnings]
    return [], config["warnings"]


def test_a_field_of_the_image_passes_a_typo_fails_by_name_a_far_key_warns_or_fails():
    keys = image_lists(read_record(json.dumps(builtin_like_record(
        {"controller.InstanceConfig": ["graceful_drain_seconds"]})), IMAGE_ID, "x.json"), IMAGE)
    assert keys.checked.startswith("keys checked against PyMotor 1.2.3 of local/pymotor:9 (abababababab), the built-in "
                                   "vLLM list (vLLM 99d7eb5d; no vLLM in the image)")
    user, env = load("vllm")
    known = [{CTRL: {"instance_config": {"graceful_drain_seconds": 30}}}]
    # the built-in lists do not know it (a warning naming their commit); the image's PyMotor reads it: nothing to say
    assert any("graceful_drain_seconds: not known to PyMotor 7d15c04" in w for w in problems(user, env, known, None)[1])
    errors, warnings = problems(user, env, known, keys)
    assert not errors and not [w for w in warnings if "graceful_drain_seconds" in w]

    typo = [{CTRL: {"instance_config": {"graceful_drain_secnds": 30}}}]
    errors = problems(user, env, typo, keys)[0]
    assert errors == ["motor_controller_config.instance_config.graceful_drain_secnds: unknown key of "
                      "motor_controller_config.instance_config (InstanceConfig), close to 'graceful_drain_seconds' (keys "
                      "checked against PyMotor 1.2.3 of local/pymotor:9 (abababababab)) (set by override 0) (did you "
                      "mean 'graceful_drain_seconds'?)"]

    far = [{CTRL: {"instance_config": {"zebra_crossing": 1}}}]
    errors, warnings = problems(user, env, far, keys)
    assert not errors
    assert any("zebra_crossing: not known to PyMotor 1.2.3 of local/pymotor:9 (abababababab), the image being deployed"
               in w for w in warnings)
    errors = problems(user, env, far, keys, "error")[0]
    assert len(errors) == 1 and "unknown key of motor_controller_config.instance_config (InstanceConfig): not known " \
        "to PyMotor 1.2.3 of local/pymotor:9" in errors[0] and "the image does not read it" in errors[0]


def test_a_field_the_image_lacks_is_checked_against_the_image_not_the_list():
    record = builtin_like_record()
    record["schema"]["pymotor"]["classes"]["coordinator.SchedulerConfig"].remove("kv_affinity_load_gate_topn")
    keys = image_lists(record, IMAGE)
    user, env = load("vllm")
    older = [{"motor_coordinator_config": {"scheduler_config": {"kv_affinity_load_gate_topn": 2}}}]
    assert not problems(user, env, older, None)[0]
    # an image older than the lists: its own fields decide (here the nearest one it has)
    errors = problems(user, env, older, keys)[0]
    assert len(errors) == 1 and "kv_affinity_load_gate_topn: unknown key of" in errors[0]
    assert "(keys checked against PyMotor 1.2.3 of local/pymotor:9" in errors[0] and "kv_affinity_load_weight" in errors[0]


def test_vllm_arguments_of_the_image():
    vllm = {"version": "0.18.0", "engine_args": list(known_keys.VLLM_ENGINE_ARGS) + ["brand_new_arg"], "cli_args": None}
    keys = image_lists(builtin_like_record(vllm=vllm), IMAGE)
    assert "vLLM 0.18.0 of local/pymotor:9 (abababababab)" in keys.checked
    user, env = load("vllm")
    new = [{P: {"engine_config": {"brand_new_arg": 1}}}]
    assert any("brand_new_arg: not known to vLLM 99d7eb5d" in w for w in problems(user, env, new, None)[1])
    errors, warnings = problems(user, env, new, keys)
    assert not errors and not [w for w in warnings if "brand_new_arg" in w]
    # no serve parser read: the built-in frontend flags stay known, PyMotor's own cross-node keys always
    assert {"port", "host", "nnodes", "master_addr"} <= keys.vllm_keys
    errors = problems(user, env, [{P: {"engine_config": {"brand_new_ar": 1}}}], keys)[0]
    assert len(errors) == 1 and "close to 'brand_new_arg' (keys checked against vLLM 0.18.0 of" in errors[0]


def test_sglang_arguments_are_checked_only_when_the_image_gave_them():
    ctx = Context({}, "warn")
    check_sglang_keys(ctx, {"tp_sise": 1}, "p.engine_config")
    assert not ctx.errors and not ctx.warnings  # no built-in SGLang list
    record = builtin_like_record()
    record["schema"]["sglang"] = {"version": "0.5.1", "server_args": ["tp_size", "model_path", "mem_fraction_static"]}
    ctx = Context({}, "warn", image_lists(record, IMAGE))
    check_sglang_keys(ctx, {"tp_size": 4, "tp_sise": 1, "zebra": 1}, "p.engine_config")
    assert [p.path for p in ctx.errors] == ["p.engine_config.tp_sise"]
    assert [p.path for p in ctx.warnings] == ["p.engine_config.zebra"]


def test_without_pymotor_in_the_image_the_builtin_pymotor_lists_stay():
    record = builtin_like_record(vllm={"version": "0.18.0", "engine_args": ["model"], "cli_args": ["port"]})
    record["schema"]["pymotor"] = None
    keys = image_lists(read_record(json.dumps(record), IMAGE_ID, "x.json"), IMAGE)
    assert keys.pymotor == known_keys.PYMOTOR and keys.class_fields == known_keys.CLASS_FIELDS
    assert "the built-in PyMotor list (PyMotor 7d15c04; the image's motor did not import)" in keys.checked
    assert keys.vllm_keys == frozenset(["model", "port"] + list(known_keys.PYMOTOR_VLLM_KEYS))


@pytest.mark.parametrize("text, message", [
    ("{not json", "unreadable key schema"),
    (json.dumps({"image_id": "sha256:other", "schema": {"format": 1}}), "not the key schema of image"),
    (json.dumps({"image_id": IMAGE_ID, "schema": {"format": 7}}), "key schema format 7, this collection reads 1"),
    (json.dumps({"image_id": IMAGE_ID, "schema": {"format": 1, "pymotor": {"classes": [], "sections": {}}}}),
     "the PyMotor part of the key schema is malformed"),
    (json.dumps({"image_id": IMAGE_ID, "schema": {"format": 1, "vllm": {"engine_args": "model"}}}),
     "the vllm part of the key schema is malformed"),
])
def test_a_bad_stored_record_is_refused_naming_the_file(text, message):
    with pytest.raises(KeySchemaError) as caught:
        read_record(text, IMAGE_ID, "/store/abab.json")
    assert caught.value.problem.path == "/store/abab.json" and message in caught.value.problem.message


def store(folder, record, image=IMAGE):
    tag = Path(tag_file(str(folder), image))
    tag.parent.mkdir(parents=True, exist_ok=True)
    tag.write_text(json.dumps({"image": image, "image_id": record["image_id"]}), encoding="utf-8")
    Path(schema_file(str(folder), record["image_id"])).write_text(json.dumps(record), encoding="utf-8")


def test_the_validation_finds_the_schema_by_image_name(tmp_path):
    assert key_lists("", str(tmp_path)) == (BUILTIN, BUILTIN.checked)
    assert key_lists(IMAGE, "") == (BUILTIN, BUILTIN.checked)  # motor_key_schema_dir='': the built-in lists
    lists, checked = key_lists(IMAGE, str(tmp_path))
    assert lists is BUILTIN and checked.endswith("no key schema stored for local/pymotor:9 (playbooks/schema.yml "
                                                 "reads one)")
    store(tmp_path, builtin_like_record())
    assert Path(schema_file(str(tmp_path), IMAGE_ID)).name == "ab" * 32 + ".json"
    lists, checked = key_lists(IMAGE, str(tmp_path))
    assert lists.pymotor[0] == "PyMotor 1.2.3 of local/pymotor:9 (abababababab)" and checked == lists.checked
    assert key_lists("local/pymotor:10", str(tmp_path))[0] is BUILTIN  # another name: its own tag record
    Path(schema_file(str(tmp_path), IMAGE_ID)).unlink()
    with pytest.raises(MotorConfigError) as caught:
        key_lists(IMAGE, str(tmp_path))
    assert "the key schema of local/pymotor:9 (%s) is missing" % IMAGE_ID in str(caught.value.problems[0])
