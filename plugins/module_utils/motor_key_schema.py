# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The script run once inside a PyMotor image (``python3 -c``, no network, no NPU) that prints the keys the image's
own code reads, as one JSON object on stdout: PyMotor's config dataclasses and the engines' argument names.

It reads PyMotor's config dataclasses the way upstream's own sample generator walks them
(``generate_user_config_sample``, motor/config/config_utils.py:235 builds ControllerConfig, CoordinatorConfig and
NodeManagerConfig and dumps their sections): every dataclass of every ``motor.config`` module with its init fields,
and the sections (dataclass-valued fields) of the three top-level configs. vLLM's names are ``EngineArgs``' fields
and, when its serve parser builds, every option of that parser; SGLang's are ``ServerArgs``' fields. A part that
does not import is left out and its error recorded: the validation then uses the collection's built-in list for it.
The reading of the result is ``plugins/plugin_utils/config/image_schema.py``.
"""

from __future__ import annotations

SCHEMA_FORMAT = 1

# Kept to the Python 3.8 standard library plus what it imports from the image; printed as the last stdout line.
SCRIPT = r'''
import dataclasses, importlib, json, pkgutil, sys, traceback

FORMAT = %(format)d
TOP = (("motor_controller_config", "motor.config.controller", "ControllerConfig"),
       ("motor_coordinator_config", "motor.config.coordinator", "CoordinatorConfig"),
       ("motor_nodemanger_config", "motor.config.node_manager", "NodeManagerConfig"))
out = {"format": FORMAT, "python": sys.version.split()[0], "pymotor": None, "vllm": None, "sglang": None,
       "errors": {}}


def short_error(exc):
    return "%%s: %%s" %% (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")


def version_of(dist, module):
    try:
        from importlib import metadata
        return metadata.version(dist)
    except Exception:
        return str(getattr(module, "__version__", "") or "unknown")


def class_name(cls):
    return "%%s.%%s" %% (cls.__module__.rsplit(".", 1)[-1], cls.__qualname__)


def record_fields(cls):
    """[(name, default factory)] of a dataclass's init fields or a pydantic model's fields (node_manager's
    ParallelConfig is one); None for any other class."""
    if not isinstance(cls, type):
        return None
    if dataclasses.is_dataclass(cls):
        return [(f.name, f.default_factory) for f in dataclasses.fields(cls) if f.init]
    model_fields = getattr(cls, "model_fields", None)
    if isinstance(model_fields, dict):
        return [(name, getattr(info, "default_factory", None)) for name, info in model_fields.items()]
    return None


def record_class(factory):
    return factory if record_fields(factory) is not None else None


def read_pymotor():
    import motor.config
    classes, nested, sections, skipped = {}, {}, {}, {}
    for info in pkgutil.iter_modules(motor.config.__path__):
        name = "motor.config." + info.name
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            skipped[name] = short_error(exc)
            continue
        for value in vars(module).values():
            if value.__class__ is type and dataclasses.is_dataclass(value) and value.__module__ == name:
                fields = record_fields(value)
                classes[class_name(value)] = sorted(name for name, _ in fields)
                for field_name, factory in fields:
                    inner = record_class(factory)
                    if inner is not None:
                        nested["%%s.%%s" %% (class_name(value), field_name)] = class_name(inner)
                        classes.setdefault(class_name(inner), sorted(name for name, _ in record_fields(inner)))
    for key, module_name, top in TOP:
        try:
            cls = getattr(importlib.import_module(module_name), top)
        except Exception as exc:
            skipped[module_name] = short_error(exc)
            continue
        sections[key] = dict((name, class_name(record_class(factory))) for name, factory in record_fields(cls)
                             if record_class(factory) is not None)
    top_classes = set(top for _, _, top in TOP)
    nested = dict((k, v) for k, v in nested.items() if k.split(".")[1] not in top_classes)
    return {"version": version_of("motor", sys.modules["motor"]), "classes": classes, "sections": sections,
            "nested": nested, "skipped": skipped}


def read_vllm():
    import vllm
    from vllm.engine.arg_utils import EngineArgs
    result = {"version": version_of("vllm", vllm), "engine_args": sorted(f.name for f in dataclasses.fields(EngineArgs)),
              "cli_args": None}
    try:
        from vllm.entrypoints.openai.cli_args import make_arg_parser
        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError:
            from vllm.utils import FlexibleArgumentParser
        parser = make_arg_parser(FlexibleArgumentParser())
        result["cli_args"] = sorted(set(a.dest for a in parser._actions if a.dest and a.dest != "help"))
    except Exception as exc:
        out["errors"]["vllm.cli_args"] = short_error(exc)
    return result


def read_sglang():
    import sglang
    from sglang.srt.server_args import ServerArgs
    return {"version": version_of("sglang", sglang), "server_args": sorted(f.name for f in dataclasses.fields(ServerArgs))}


for part, reader in (("pymotor", read_pymotor), ("vllm", read_vllm), ("sglang", read_sglang)):
    try:
        out[part] = reader()
    except BaseException as exc:
        out["errors"][part] = short_error(exc)
        if not isinstance(exc, ImportError):
            out["errors"][part + ".traceback"] = traceback.format_exc()[-2000:]
sys.stdout.flush()
sys.stdout.write("\n" + json.dumps(out, sort_keys=True) + "\n")
''' % {"format": SCHEMA_FORMAT}


def parse_output(stdout):
    """The JSON object the script printed last (imports may print before it); ValueError when there is none."""
    import json

    for line in reversed((stdout or "").strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            value = json.loads(line)
            if isinstance(value, dict) and value.get("format") == SCHEMA_FORMAT:
                return value
    raise ValueError("the image printed no key schema")
