# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Render the config directories (CONFIGMAP_PATH) of PyMotor containers on the host the module runs on.

Every directory gets a flat copy of the image's startup scripts (``startup/*`` and ``startup/roles/*`` side by
side, as PyMotor's ConfigMap and docker-only guide lay them out; cached per image id in ``startup_dir``, copied out of
the image once through the Docker Engine API: a created, never started container, the directory read as a tar stream
from GET /containers/{id}/archive, the container removed again) with the ``set_*_env`` functions injected into the
script that calls them the way PyMotor's deployer does (replaced in place, else prepended), plus the given files
(user_config.json, env.json). Files are written atomically and only when their content,
mode or owner differ; files no longer wanted are removed.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile


def shell_escape(value):
    """PyMotor's generator (examples/deployer/lib/utils.py shell_escape): backslash, double quote, backtick and
    control characters are escaped, ``$`` is not, so ``$VAR`` in an env.json value expands when the function runs."""
    out = str(value)
    for char, escaped in (("\\", "\\\\"), ('"', '\\"'), ("`", "\\`"), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")):
        out = out.replace(char, escaped)
    return out


def function_lines(name, env):
    """The lines of one injected function, as PyMotor's update_shell_safely writes them (in the given order)."""
    exports = ['    export %s="%s"\n' % (key, shell_escape(value)) for key, value in (env or {}).items()]
    return ["function %s() {\n" % name] + (exports or ["    :\n"]) + ["}\n"]  # bash rejects an empty body


def inject_function(text, name, env):
    """``text`` with ``function name() {...}`` replaced in place, or prepended when the script has none (PyMotor's
    update_shell_safely: the block ends at the first line that is ``}``)."""
    lines = text.splitlines(True)
    start = end = -1
    for index, line in enumerate(lines):
        if line.strip().startswith("function %s()" % name):
            start = index
        elif start != -1 and line.strip() == "}":
            end = index
            break
    new = function_lines(name, env)
    if start != -1 and end != -1:
        return "".join(lines[:start] + new + lines[end + 1:])
    return "".join(new + lines)


def render_functions(text, functions):
    """``text`` with every function of ``functions`` (name -> env) injected, in sorted order of the names."""
    for name in sorted(functions):
        text = inject_function(text, name, functions[name])
    return text


def startup_files(startup_dir):
    """{name: bytes} of the config directory's scripts: the top-level files of the image's startup directory and the
    role scripts of its ``roles/`` directory, all flat (boot.sh sources ``$SCRIPT_DIR/<role>.sh``: PyMotor's
    ConfigMap and its docker-only guide both copy ``startup/roles/*`` next to boot.sh)."""
    files = {}
    for sub in ("", "roles"):
        top = os.path.join(startup_dir, sub)
        if not os.path.isdir(top):
            continue
        for name in sorted(os.listdir(top)):
            full = os.path.join(top, name)
            if not os.path.isfile(full):
                continue
            if name in files:
                raise ValueError("%s: %s is both a startup script and a role script of the image" % (startup_dir, name))
            with open(full, "rb") as handle:
                files[name] = handle.read()
    return files


def wanted_files(startup_dir, container):
    """{relative path: bytes} of one config directory (flat)."""
    files = startup_files(startup_dir)
    secret = container.get("secret_functions") or {}
    for script, functions in sorted((container.get("functions") or {}).items()):
        hidden = secret.get(script) or {}
        functions = dict((name, dict(env or {}, **(hidden.get(name) or {}))) for name, env in functions.items())
        if script not in files:
            raise ValueError("%s: %s is not among the startup scripts of the image (%s)" % (container["name"], script, startup_dir))
        files[script] = render_functions(files[script].decode(), functions).encode()
    for script, text in sorted((container.get("prepend") or {}).items()):
        if script not in files:
            raise ValueError("%s: %s is not among the startup scripts of the image (%s)" % (container["name"], script, startup_dir))
        first = text.splitlines()[0] if text else ""
        if not files[script].decode().startswith(first):  # PyMotor's deployer: never twice (the first line tells)
            files[script] = text.encode() + files[script]
    for rel, content in (container.get("files") or {}).items():
        files[rel] = content.encode() if isinstance(content, str) else content
    return files


def ensure_dir(path, mode, check):
    changed = False
    if not os.path.isdir(path):
        changed = True
        if not check:
            os.makedirs(path, mode)
    if not check or os.path.isdir(path):
        st = os.stat(path)
        if (st.st_mode & 0o7777) != mode or st.st_uid != 0 or st.st_gid != 0:
            changed = True
            if not check:
                os.chmod(path, mode)
                os.chown(path, 0, 0)
    return changed


def sync_container(container, startup_dir, dir_mode, file_mode, check):
    path = container["path"]
    files = wanted_files(startup_dir, container)
    keep = set(container.get("keep") or ())
    changed = ensure_dir(os.path.dirname(path), dir_mode, check)  # the job directory
    changed = ensure_dir(path, dir_mode, check) or changed
    digest = hashlib.sha256()
    for rel in sorted(files):
        content = files[rel]
        target = os.path.join(path, rel)
        if ensure_dir(os.path.dirname(target), dir_mode, check):
            changed = True
        current = None
        if os.path.isfile(target):
            with open(target, "rb") as handle:
                current = handle.read()
            if rel in keep:  # a running container's copy stays as it is (RENDER_OPTIONS: keep)
                content = current
        digest.update(rel.encode() + b"\0" + hashlib.sha256(content).hexdigest().encode() + b"\n")
        if current != content:
            changed = True
            if not check:
                tmp = target + ".pymotor-tmp"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, file_mode)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(content)
                os.chmod(tmp, file_mode)
                os.chown(tmp, 0, 0)
                os.rename(tmp, target)
        elif not check:
            st = os.stat(target)
            if (st.st_mode & 0o7777) != file_mode or st.st_uid != 0 or st.st_gid != 0:
                changed = True
                os.chmod(target, file_mode)
                os.chown(target, 0, 0)
    # remove what is no longer wanted (files of an older image, for example)
    if os.path.isdir(path):
        for root, dirs, names in os.walk(path, topdown=False):
            for name in names:
                rel = os.path.relpath(os.path.join(root, name), path)
                if rel not in files:
                    changed = True
                    if not check:
                        os.remove(os.path.join(root, name))
            for name in dirs:
                full = os.path.join(root, name)
                if not any(rel.startswith(os.path.relpath(full, path) + os.sep) for rel in files):
                    changed = True
                    if not check:
                        os.rmdir(full)
    return changed, digest.hexdigest()


def _safe_members(archive, top):
    """Regular files and directories below ``top`` (the archived directory's name), with ``top/`` stripped."""
    for member in archive.getmembers():
        name = member.name[2:] if member.name.startswith("./") else member.name
        if name == top or not name.startswith(top + "/"):
            continue
        rel = os.path.normpath(name[len(top) + 1:])
        if rel.startswith("..") or os.path.isabs(rel) or not (member.isfile() or member.isdir()):
            continue
        member.name = rel
        yield member


def extract_startup(startup_dir, image, in_image, client):
    """Copy the startup scripts out of the image into startup_dir (atomically: a temporary sibling renamed).
    ``client``: a motor_docker.DockerClient (the module's docker_host/TLS)."""
    parent = os.path.dirname(startup_dir)
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    tmp = tempfile.mkdtemp(prefix=os.path.basename(startup_dir) + ".tmp.", dir=parent)
    try:
        source = in_image.rstrip("/")
        data = client.copy_out_of_image(image, source, labels={"io.pymotor.purpose": "startup-scripts"})
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            for member in _safe_members(archive, os.path.basename(source)):
                member.mode &= ~0o022
                archive.extract(member, tmp, set_attrs=False)
                os.chmod(os.path.join(tmp, member.name), member.mode & 0o7777)
        if not os.path.isfile(os.path.join(tmp, "boot.sh")):
            raise ValueError("%s has no boot.sh in %s" % (image, in_image))
        os.chmod(tmp, 0o755)
        os.rename(tmp, startup_dir)
        tmp = None
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


# The options of a render (the configmap option of pymotor.ascend.motor_containers).
RENDER_OPTIONS = dict(
    startup_dir=dict(type="path", required=True),
    image=dict(type="str", default=""),
    in_image=dict(type="path", default="/tmp/motor/examples/deployer/startup"),
    dir_mode=dict(type="str", default="0750"),
    file_mode=dict(type="str", default="0640"),
    dirs=dict(type="list", elements="path", default=[]),
    containers=dict(type="list", elements="dict", default=[], options=dict(
        name=dict(type="str", required=True),
        path=dict(type="path", required=True),
        # the texts are masked wherever they appear; names, paths and environment values stay readable
        files=dict(type="dict", default={}, no_log=True),
        functions=dict(type="dict", default={}),
        prepend=dict(type="dict", default={}),
        # the variables with a secret-looking name, merged into ``functions`` (same shape): never logged
        secret_functions=dict(type="dict", default={}, no_log=True),
        # files left as they are when present: the user_config.json of a container that keeps running
        keep=dict(type="list", elements="str", default=[]),
    )),
)


def render(params, check, new_client=None):
    """Render every directory of ``params`` (RENDER_OPTIONS); returns changed, changed_dirs, digests, extracted.
    ``new_client()`` gives the Docker client to copy the startup scripts out of the image with (only called when
    they must be). Raises ValueError, OSError, tarfile.TarError or motor_docker's DockerError/DockerUnavailable."""
    startup_dir = params["startup_dir"]
    extracted = False
    if params["image"] and not os.path.isfile(os.path.join(startup_dir, "boot.sh")) and not check:
        if new_client is None:
            raise ValueError("the startup scripts must be copied out of %s, but no Docker client was given" % params["image"])
        extract_startup(startup_dir, params["image"], params["in_image"], new_client())
        extracted = True
    if not os.path.isdir(startup_dir) and check:  # nothing copied in check mode: every directory would change
        return {"changed": True, "changed_dirs": [c["name"] for c in params["containers"]], "digests": {},
                "extracted": False}
    if not os.path.isdir(startup_dir):
        raise ValueError("startup scripts not found at %s (the image was not given or has none)" % startup_dir)
    dir_mode = int(params["dir_mode"], 8)
    file_mode = int(params["file_mode"], 8)
    digests, changed = {}, []
    for extra in params["dirs"]:
        if ensure_dir(extra, dir_mode, check):
            changed.append(extra)
    for container in params["containers"]:
        container_changed, digest = sync_container(container, startup_dir, dir_mode, file_mode, check)
        digests[container["name"]] = digest
        if container_changed:
            changed.append(container["name"])
    return {"changed": bool(changed) or extracted, "changed_dirs": changed, "digests": digests, "extracted": extracted}
