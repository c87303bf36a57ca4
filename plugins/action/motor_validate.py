# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The validate phase's entry point, on the controller: read user_config.json and env.json, validate, normalize."""

from __future__ import annotations

import os

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.context import MotorConfigError, load_json_text
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.image_schema import (
    BUILTIN,
    DEFAULT_SCHEMA_DIR,
    KeySchemaError,
    image_id_of,
    image_lists,
    read_record,
    schema_file,
    tag_file,
)
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.normalize import config_summary, normalize
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.standby import standby_problems
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import CONTROL_GROUP, Problem
from ansible_collections.pymotor.ascend.plugins.plugin_utils.entry_point import EntryPoint
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.inventory import host_view, pymotor_hosts
from ansible_collections.pymotor.ascend.plugins.plugin_utils.plan.inventory_check import inventory_problems

NO_SOURCE = Problem("motor_config_dir", "no PyMotor configuration given",
                    "set motor_config_dir to a directory holding user_config.json and env.json, like deploy.py "
                    "--config_dir, or set both motor_user_config_path and motor_env_config_path")
FILE_HINT = ("motor_config_dir must hold user_config.json and env.json, like deploy.py --config_dir; or point "
             "motor_user_config_path and motor_env_config_path at the two files")


def config_paths(config_dir, user_path, env_path):
    """The two files (relative paths are relative to the current directory, like deploy.py's options)."""
    if not config_dir and not (user_path and env_path):
        raise MotorConfigError([NO_SOURCE])
    user_path = user_path or os.path.join(config_dir or "", "user_config.json")
    env_path = env_path or os.path.join(config_dir or "", "env.json")
    return os.path.realpath(user_path), os.path.realpath(env_path)


def read_text(path):
    """The text of one configuration file; a missing one is a problem named by its path."""
    if not os.path.isfile(path):
        raise MotorConfigError([Problem(path, "not found or not a file", FILE_HINT)])
    with open(path, "rb") as handle:
        return to_text(handle.read(), errors="surrogate_or_strict")


def key_lists(image, schema_dir):
    """(the key lists to check against, the line saying which): the stored key schema of ``image`` when there is
    one in ``schema_dir`` (written by build_image.yml / schema.yml), else the built-in lists."""
    if not image or not schema_dir:
        return BUILTIN, BUILTIN.checked
    schema_dir = os.path.expanduser(schema_dir)
    tag = tag_file(schema_dir, image)
    if not os.path.isfile(tag):
        return BUILTIN, "%s: no key schema stored for %s (playbooks/schema.yml reads one)" % (BUILTIN.checked, image)
    try:
        with open(tag, "rb") as handle:
            image_id = image_id_of(to_text(handle.read(), errors="surrogate_or_strict"), image, tag)
        path = schema_file(schema_dir, image_id)
        if not os.path.isfile(path):
            raise KeySchemaError(Problem(path, "the key schema of %s (%s) is missing" % (image, image_id),
                                         "run playbooks/schema.yml for the image again, or remove %s" % tag))
        with open(path, "rb") as handle:
            lists = image_lists(read_record(to_text(handle.read(), errors="surrogate_or_strict"), image_id, path),
                                image)
    except KeySchemaError as err:
        raise MotorConfigError([err.problem]) from None
    return lists, lists.checked


def deploy_value(user_config, key):
    """motor_deploy_config.<key> of a user_config as read (None when it is not there)."""
    deploy = user_config.get("motor_deploy_config") if isinstance(user_config, dict) else None
    return deploy.get(key) if isinstance(deploy, dict) else None


class ActionModule(EntryPoint):
    """pymotor.ascend.motor_validate (documentation in plugins/modules/motor_validate.py)."""

    ARGUMENT_SPEC = {"config_dir": {"type": "path"}, "user_config_path": {"type": "path"},
                     "env_config_path": {"type": "path"}, "overrides": {"type": "raw", "default": []},
                     "unknown_keys": {"type": "str", "default": "warn", "choices": ["warn", "error"]},
                     "image": {"type": "str", "default": ""},
                     "schema_dir": {"type": "str", "default": DEFAULT_SCHEMA_DIR},
                     "check_inventory": {"type": "bool", "default": True}}
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def phase(self, args, task_vars):
        user_config = None
        try:
            user_path, env_path = config_paths(args["config_dir"], args["user_config_path"], args["env_config_path"])
            user_config = load_json_text(read_text(user_path), "user_config.json")
            env_config = load_json_text(read_text(env_path), "env.json")
            # the image deployed: motor_image, else the configuration's image_name (as deploy.yml chooses it)
            keys, checked = key_lists(args["image"] or deploy_value(user_config, "image_name"), args["schema_dir"])
            config = normalize(user_config, env_config, args["overrides"], args["unknown_keys"], keys)
        except MotorConfigError as err:
            # the inventory's own problems in the same list (the plan, which checks them otherwise, will not run)
            views = self.host_views(task_vars)
            problems = self.inventory_problems(args, task_vars, views, deploy_value(user_config, "hardware_type"))
            return self.failed(err.problems + problems + self.standby_problems(task_vars, views, user_config),
                               err.warnings)
        # a valid configuration: the inventory is judged by the plan's own host rules (plan/hosts.py) here too, so
        # validate.yml -i <inventory> refuses what plan.yml would
        views = self.host_views(task_vars)
        problems = self.inventory_problems(args, task_vars, views, config.get("hardware_type"))
        if args["check_inventory"]:  # master/standby's contract (two control hosts, motor_vip) before any change
            problems += self.standby_problems(task_vars, views, user_config)
        if problems:
            return self.failed(problems, config.get("warnings") or [])
        return dict(self.facts(motor_normalized_config=config), summary=config_summary(config), keys_checked=checked)

    def host_views(self, task_vars):
        """{host: its PyMotor variables} of the inventory's PyMotor hosts (empty without an inventory)."""
        return {h: host_view(self.host_vars(task_vars, h)) for h in pymotor_hosts(task_vars.get("groups"))}

    @staticmethod
    def inventory_problems(args, task_vars, views, hardware_type):
        """The problems of the inventory's PyMotor hosts (none without an inventory, nor for a playbook that plans
        nothing: ``check_inventory`` false, the day-2 verbs that only need the job id)."""
        if not args["check_inventory"]:
            return []
        return inventory_problems(views, hardware_type, bool(task_vars.get("motor_plan_discover")))

    def standby_problems(self, task_vars, views, user_config):
        """Master/standby's inventory contract (two control hosts, ``motor_vip``), named with the mode's refusal."""
        controls = list((task_vars.get("groups") or {}).get(CONTROL_GROUP) or [])
        first = self.host_vars(task_vars, controls[0]) if controls else task_vars
        tls_dir = first.get("motor_service_etcd_tls_dir") or task_vars.get("motor_service_etcd_tls_dir") or ""
        return standby_problems(user_config, controls, first.get("motor_vip"),
                                {h: view.get("motor_host_ip") for h, view in views.items()}, tls_dir)
