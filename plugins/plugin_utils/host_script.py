# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Run a module's standard-library code on its host as one plain Python script (module_utils/motor_script.py), for
action plugins whose module needs nothing of Ansible on the host.

The task's arguments are validated here against the module's own argument spec, the way AnsibleModule would on the
host, except for what only the host knows: environment-variable fallbacks and the expansion of path options travel
with the script and are resolved there. Interpreter, become and the task's ``environment`` are Ansible's own, as in
a pipelined module run. Where Ansible could not pipeline a module (pipelining off, async, delegation), the module
runs through AnsiballZ as usual: the same code, the same result."""

from __future__ import annotations

import json

from ansible import constants as C
from ansible.executor.interpreter_discovery import discover_interpreter
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.parameters import remove_values
from ansible.plugins.action import ActionBase

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_script

AUTO_INTERPRETERS = ("auto", "auto_legacy", "auto_silent", "auto_legacy_silent")
_TEXTS = {}


def source(module):
    """(file name, text) of an imported module, read once per controller process."""
    if module.__name__ not in _TEXTS:
        with open(module.__file__, encoding="utf-8") as handle:
            _TEXTS[module.__name__] = (module.__file__, handle.read())
    return _TEXTS[module.__name__]


def _path_shape(option):
    kind, elements, suboptions = option.get("type", "str"), option.get("elements"), option.get("options")
    if kind == "path":
        return "path"
    if kind == "list" and elements == "path":
        return ["path"]
    if suboptions and kind in ("dict", "list"):
        shape = dict((name, _path_shape(sub)) for name, sub in suboptions.items())
        shape = dict((name, sub) for name, sub in shape.items() if sub)
        return (shape if kind == "dict" else [shape]) if shape else None
    return None


def _controller_option(option):
    """The option as the controller validates it: paths as strings, no fallback, no default under a fallback."""
    out = dict(option)
    if out.get("type") == "path":
        out["type"] = "str"
    if out.get("elements") == "path":
        out["elements"] = "str"
    if out.pop("fallback", None) is not None:
        out.pop("default", None)
    if out.get("options"):
        out["options"] = dict((name, _controller_option(sub)) for name, sub in out["options"].items())
    return out


def split_spec(spec):
    """(the spec the controller validates with, the fallbacks the host resolves, the shape of the path options)."""
    fallbacks = {}
    for name, option in spec.items():
        if option.get("fallback") is not None:
            variables = list(option["fallback"][1])
            fallbacks[name] = [variables, option.get("default"), option.get("type", "str")]
    paths = dict((name, _path_shape(option)) for name, option in spec.items())
    return (dict((name, _controller_option(option)) for name, option in spec.items()), fallbacks,
            dict((name, shape) for name, shape in paths.items() if shape))


def python_interpreter(action, task_vars):
    """(interpreter, facts to return): configured (ansible_python_interpreter, interpreter_python), else discovered
    once per host like Ansible does (the fact then spares the next module run the discovery)."""
    configured = C.config.get_config_value("INTERPRETER_PYTHON", variables=task_vars)
    configured = action._templar.template(configured) if configured else configured
    if configured and configured not in AUTO_INTERPRETERS:
        return configured, {}
    discovered = (task_vars.get("ansible_facts") or {}).get("discovered_interpreter_python")
    if discovered:
        return discovered, {}
    found = discover_interpreter(action=action, interpreter_name="python", discovery_mode=configured or "auto",
                                 task_vars=task_vars)
    return found, {"discovered_interpreter_python": found}


def build_script(spec, args, entry, modules, required_together=None, check_mode=False, diff=False):
    """(script text, validation result): the script that runs ``entry`` ((module, function name)) as
    ``function(params, check_mode, diff)`` with ``args`` validated against ``spec`` (no script when they are not
    valid: the result's error_messages say why). ``modules``: the module_utils the entry needs, itself included (the
    standard library only, shipped as text)."""
    controller_spec, fallbacks, paths = split_spec(spec)
    validated = ArgumentSpecValidator(controller_spec, required_together=required_together).validate(args)
    if validated.error_messages:
        return None, validated
    payload = {
        "sources": dict((module.__name__, source(module)) for module in modules),
        "entry": [entry[0].__name__, entry[1]],
        "params": validated.validated_parameters,
        "fallbacks": fallbacks,
        "paths": paths,
        "check_mode": bool(check_mode),
        "diff": bool(diff),
    }
    return "%s\nrun(%r)\n" % (source(motor_script)[1], json.dumps(payload)), validated


def run_on_host(action, task_vars, spec, entry, modules, required_together=None):
    """The result of ``entry`` run on the task's host with the task's arguments (build_script), or of the module
    through AnsiballZ where Ansible would not pipeline it."""
    task = action._task
    if task.async_val or task.delegate_to or not action._is_pipelining_enabled("new"):
        return action._execute_module(task_vars=task_vars)
    script, validated = build_script(spec, task.args, entry, modules, required_together, task.check_mode, task.diff)
    if script is None:
        return {"failed": True, "msg": "; ".join(validated.error_messages)}
    interpreter, facts = python_interpreter(action, task_vars)
    shell = action._connection._shell
    command = shell.build_module_command(action._compute_environment_string(), "#!" + interpreter, "")
    answer = action._low_level_execute_command(command, sudoable=True, in_data=script.encode("utf-8"))
    try:
        result = json.loads(answer.get("stdout") or "")
    except ValueError:
        result = {"failed": True, "rc": answer.get("rc"), "msg": "the host script did not answer with JSON",
                  "module_stdout": answer.get("stdout", ""), "module_stderr": answer.get("stderr", "")}
    if facts:
        result.setdefault("ansible_facts", {}).update(facts)
    # What AnsibleModule adds and hides: the arguments (shown at -vvv), and no value of a no_log option anywhere
    # (the same set of values AnsibleModule takes from its validation).
    result.setdefault("invocation", {"module_args": validated.validated_parameters})
    return remove_values(result, validated._no_log_values)


class HostScriptAction(ActionBase):
    """The action plugin of a module whose code runs as a host script: the subclass names the module's argument
    spec (SPEC, REQUIRED_TOGETHER), its entry (ENTRY: (module, function name)) and the module_utils it needs
    (MODULES, the entry's own included)."""

    TRANSFERS_FILES = False
    SPEC = {}
    REQUIRED_TOGETHER = None
    ENTRY = None
    MODULES = ()

    def run(self, tmp=None, task_vars=None):
        result = super(HostScriptAction, self).run(tmp, task_vars)
        result.update(run_on_host(self, task_vars or {}, self.SPEC, self.ENTRY, self.MODULES, self.REQUIRED_TOGETHER))
        return result
