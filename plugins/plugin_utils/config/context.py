# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The problem collector of the validation (paths, override provenance) and its typed accessors."""

from __future__ import annotations

import difflib
import json
import posixpath

from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.image_schema import BUILTIN
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.known_keys import PYMOTOR
from ansible_collections.pymotor.ascend.plugins.plugin_utils.config.schema import ENGINE_CONFIG_PATH_RE
from ansible_collections.pymotor.ascend.plugins.plugin_utils.contract import Problem, ProblemsError


MISSING = object()


# motor_unknown_keys: what a key far from every known one is (a key close to a known one is always an error)
UNKNOWN_KEYS_MODES = ("warn", "error")


class MotorConfigError(ProblemsError):
    """Raised when a configuration has errors; ``.problems`` lists every one of them."""


class Context:
    """Collects errors and warnings; tags paths that came from an override."""

    def __init__(self, overridden, unknown_keys="warn", keys=None):
        self.errors = []
        self.warnings = []
        self.overridden = overridden
        self.unknown_keys = unknown_keys
        # the key lists of config/image_schema.py: the built-in ones, or those read from the deployed image
        self.keys = keys if keys is not None else BUILTIN

    def _origin(self, path):
        # The path itself or an ancestor (a replaced list or dict) may come from an override.
        for candidate in [path] + _ancestors(path):
            if candidate in self.overridden:
                return self.overridden[candidate]
        return None

    def _problem(self, path, message, hint):
        index = self._origin(path)
        if index is not None:
            message = "%s (set by override %d)" % (message, index)
        return Problem(path, message, hint)

    def error(self, path, message, hint=""):
        """Record an error."""
        self.errors.append(self._problem(path, message, hint))

    def warn(self, path, message, hint=""):
        """Record a warning."""
        self.warnings.append(self._problem(path, message, hint))


def _ancestors(path):
    cuts = [i for i, char in enumerate(path) if char in ".[" and i > 0]
    return [path[:i] for i in reversed(cuts)]


def join_path(path, key):
    if isinstance(key, int):
        return "%s[%d]" % (path, key)
    return "%s.%s" % (path, key) if path else str(key)


def canonical_key(key):
    return str(key).replace("-", "_")


def canonical_path(path):
    """Spell the engine_config key of a path with underscores, as the normalized config does."""
    return ENGINE_CONFIG_PATH_RE.sub(lambda m: m.group(1) + canonical_key(m.group(2)), path)


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def describe(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean %s" % json.dumps(value)
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "string %s" % json.dumps(value, ensure_ascii=False)
    # by kind, not type(value).__name__: values from Ansible variables are subclasses such as _AnsibleTaggedFloat
    kind = "int" if isinstance(value, int) else "float" if isinstance(value, float) else type(value).__name__
    return "%s %r" % (kind, value)


# kind -> (types, what the value must be, how to fix a wrong type)
_KINDS = {"object": (dict, "an object", "use a JSON object {...}"), "string": (str, "a string", "quote the value")}


def _typed(ctx, parent, key, path, kind, required, hint):
    """Return ``parent[key]`` when it is of ``kind``; report a wrong type, or a missing key when ``required``."""
    types, what, fix = _KINDS[kind]
    value = parent.get(key, MISSING) if isinstance(parent, dict) else MISSING
    if value is MISSING:
        if required:
            ctx.error(path, "missing required %s" % kind, hint or "add it")
        return None
    if not isinstance(value, types):
        ctx.error(path, "expected %s, got %s" % (what, describe(value)), hint or fix)
        return None
    return value


def dict_or_none(ctx, parent, key, path, required=False, hint=""):
    """Return ``parent[key]`` if it is an object; report a wrong type or a missing key."""
    return _typed(ctx, parent, key, path, "object", required, hint)


def int_in(ctx, parent, key, path, low, high=None, hint="", default=MISSING):
    """Return an integer within [low, high] or None (after reporting why)."""
    value = parent.get(key, default)
    if value is MISSING:
        return None
    if not is_int(value):
        ctx.error(path, "expected an integer, got %s" % describe(value), hint or "write a plain JSON integer")
        return None
    if value < low or (high is not None and value > high):
        bounds = "in %d..%d" % (low, high) if high is not None else ">= %d" % low
        ctx.error(path, "%d is out of range: must be %s" % (value, bounds), hint or "use a value %s" % bounds)
        return None
    return value


def str_or_none(ctx, parent, key, path, required=False, hint=""):
    """Return ``parent[key]`` if it is a string; report a wrong type or a missing key."""
    return _typed(ctx, parent, key, path, "string", required, hint)


def check_model_path(ctx, model, path, weight_path):
    """An engine's weights directory (``model`` at ``path``, None when absent or mistyped): absolute, and under
    ``weight_mount_path`` (the only host directory the containers mount), else a warning."""
    if model is None:
        return
    if not model.startswith("/"):
        ctx.error(path, "%s is not an absolute path" % describe(model),
                  "use the weight directory's absolute path, under weight_mount_path")
    elif isinstance(weight_path, str) and weight_path.startswith("/"):
        root = posixpath.normpath(weight_path)
        if posixpath.commonpath([root, posixpath.normpath(model)]) != root:
            ctx.warn(path, "%s is not under weight_mount_path %s" % (model, weight_path),
                     "containers mount only weight_mount_path; make sure the model is reachable there")


def suggest(key, known):
    matches = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.75)
    return matches[0] if matches else None


def unknown_key(ctx, parent, key, what, known, source=PYMOTOR, guess=MISSING, far_hint=""):
    """The one rule of a key no list knows (``key`` of the mapping at path ``parent``; ``source``: the list's (origin,
    who else may read it: None when the list was read from the deployed image itself)). Close to a known key: an error
    with a did-you-mean (a typo would be dropped or refused where it is read). Far from every known one: a warning, as
    a newer release may read it (upstream's own loaders ignore keys they do not read: motor/config/controller.py:186,
    coordinator.py:403, node_manager.py:366), or an error when motor_unknown_keys is error."""
    path = join_path(parent, key)
    guess = suggest(key, known) if guess is MISSING else guess
    if guess:
        ctx.error(path, "unknown key of %s, close to '%s' (keys checked against %s)" % (what, guess, source[0]),
                  "did you mean '%s'?" % guess)
    elif ctx.unknown_keys == "error":
        ctx.error(path, "unknown key of %s: not known to %s" % (what, source[0]),
                  "remove it, or set motor_unknown_keys=warn when %s reads it" % source[1] if source[1] else
                  "remove it: the image does not read it; motor_unknown_keys=warn lets it through with a warning")
    elif source[1]:
        ctx.warn(path, "not known to %s; %s may read it" % (source[0], source[1]),
                 far_hint or "kept as written; set motor_unknown_keys=error to refuse keys no list knows")
    else:
        ctx.warn(path, "not known to %s, the image being deployed" % source[0],
                 far_hint or "kept as written, though the image does not read it; set motor_unknown_keys=error to "
                 "refuse it")


def reject_unknown_keys(ctx, mapping, known, path, what, source=PYMOTOR):
    """Every key of ``mapping`` not in ``known``: ``unknown_key``'s rule."""
    for key in mapping:
        if key not in known:
            unknown_key(ctx, path, key, what, known, source)


def load_json_text(text, name):
    """Parse JSON text; on a syntax error raise MotorConfigError naming line and column."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    if not isinstance(text, str):
        raise MotorConfigError([Problem(name, "expected JSON text, got %s" % describe(text), "pass a string")])
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MotorConfigError([Problem(name, "invalid JSON at line %d column %d: %s" % (exc.lineno, exc.colno, exc.msg),
                                        "fix the JSON syntax")]) from None
    if not isinstance(value, dict):
        raise MotorConfigError([Problem(name, "expected a JSON object, got %s" % describe(value),
                                        "the file must contain {...}")])
    return value
