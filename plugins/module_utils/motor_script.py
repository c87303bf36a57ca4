# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The host side of plugin_utils/host_script.py: the head of a plain Python script that runs a module's
standard-library code without AnsiballZ. The controller sends this file's text, the sources of the module_utils the
code needs and a call ``run(<payload JSON>)`` to the interpreter's stdin; the result is one JSON document on stdout.

Why: an AnsiballZ run imports ansible.module_utils.basic and what it pulls in from a zip, compiled again on every run
(about 0.2 CPU s per run on a host), while the probe itself needs the standard library only.

The payload: ``sources`` (module name -> [file name, text]), ``entry`` ([module name, function name]: the function
takes params, check_mode and diff and returns the result), ``params`` (validated on the controller), ``fallbacks``
(option -> [environment variables, default, type]: resolved here, where the module would read them), ``paths``
(which options are paths, expanded here: ``~`` and variables are the host's), ``check_mode`` and ``diff``."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import json
import os
import sys
import traceback

TRUE_WORDS = ("y", "yes", "on", "1", "true", "t")
FALSE_WORDS = ("n", "no", "off", "0", "false", "f")


class SourceImporter(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the shipped modules from their texts; their parent packages are empty namespace packages."""

    def __init__(self, sources):
        self.sources = sources
        self.packages = set()
        for name in sources:
            parts = name.split(".")
            self.packages.update(".".join(parts[:end]) for end in range(1, len(parts)))

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.sources:
            return importlib.util.spec_from_loader(fullname, self, origin=self.sources[fullname][0])
        if fullname in self.packages:
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if module.__name__ in self.sources:
            filename, text = self.sources[module.__name__]
            exec(compile(text, filename, "exec", dont_inherit=True), module.__dict__)


def env_value(text, kind):
    """An environment variable's text as the option's type (the types the fallbacks use)."""
    if kind == "bool":
        word = text.strip().lower()
        if word not in TRUE_WORDS + FALSE_WORDS:
            raise ValueError("%r is not a boolean" % text)
        return word in TRUE_WORDS
    return int(text) if kind == "int" else text


def resolve_fallbacks(params, fallbacks):
    """Options not given take the first set environment variable of their fallback, else their default."""
    out = dict(params)
    for name, (variables, default, kind) in fallbacks.items():
        if out.get(name) is None:
            found = [os.environ[variable] for variable in variables if variable in os.environ]
            out[name] = env_value(found[0], kind) if found else default
    return out


def expand_paths(value, shape):
    """Path options expanded like AnsibleModule does (``~`` and variables): shape "path", [shape] or {key: shape}."""
    if value is None:
        return None
    if shape == "path":
        return os.path.expanduser(os.path.expandvars(value))
    if isinstance(shape, list):
        return [expand_paths(item, shape[0]) for item in value]
    return dict(value, **dict((key, expand_paths(value.get(key), sub)) for key, sub in shape.items() if key in value))


def run(payload_text):
    """Run the payload's entry function and print its result (or the failure) as JSON."""
    payload = json.loads(payload_text)
    sys.meta_path.insert(0, SourceImporter(payload["sources"]))
    try:
        params = expand_paths(resolve_fallbacks(payload["params"], payload["fallbacks"]), payload["paths"])
        module_name, function = payload["entry"]
        entry = getattr(importlib.import_module(module_name), function)
        result = entry(params, payload["check_mode"], payload["diff"])
    except Exception as exc:  # reported like a module's unhandled exception: failed, with the traceback
        result = {"failed": True, "msg": "%s: %s" % (type(exc).__name__, exc), "exception": traceback.format_exc()}
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()
