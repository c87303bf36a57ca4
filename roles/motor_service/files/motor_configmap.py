"""Render the config directories (CONFIGMAP_PATH) of the PyMotor containers of one host in one call
(the JSON spec on stdin, or in the file named by argv[1]).

Spec: {startup_dir, dir_mode, file_mode, dirs: [extra dirs], extract: {image, in_image} (optional),
containers: [{name, path, files: {rel: text}, functions: {script basename: {function name: {KEY: value}}}}]}.
When startup_dir has no boot.sh and extract is given, the startup scripts are first copied out of the image
(docker create + docker cp into a temporary sibling, renamed into place: startup_dir is a cache per image id).
Every config dir gets a copy of startup_dir
with the set_*_env functions prepended to the script that defines them (PyMotor's deployer does the same),
plus the extra files; files are written only when content/mode/owner differ, unwanted files are removed.
Prints {"changed": [names], "digests": {name: sha256 over relative paths and file hashes}}.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile


def shell_quote(value):
    """A double-quoted shell word: export KEY="value"."""
    out = str(value)
    for char in ("\\", '"', "$", "`"):
        out = out.replace(char, "\\" + char)
    return '"' + out + '"'


def render_functions(functions):
    text = ""
    for name in sorted(functions):
        env = functions[name] or {}
        body = "".join("    export %s=%s\n" % (key, shell_quote(env[key])) for key in sorted(env)) or "    :\n"
        text += "%s() {\n%s}\n" % (name, body)
    return text


def wanted_files(startup_dir, container):
    """{relative path: bytes} of one config directory."""
    files = {}
    for root, _dirs, names in os.walk(startup_dir):
        for name in names:
            full = os.path.join(root, name)
            with open(full, "rb") as handle:
                files[os.path.relpath(full, startup_dir)] = handle.read()
    by_base = {}
    for rel in files:
        by_base.setdefault(os.path.basename(rel), []).append(rel)
    for script, functions in sorted((container.get("functions") or {}).items()):
        targets = by_base.get(script)
        if not targets:
            raise ValueError("%s: %s is not among the startup scripts of the image (%s)" % (container["name"], script, startup_dir))
        rel = sorted(targets, key=len)[0]
        files[rel] = render_functions(functions).encode() + files[rel]
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
    changed = ensure_dir(os.path.dirname(path), dir_mode, check)  # the job directory
    changed = ensure_dir(path, dir_mode, check) or changed
    digest = hashlib.sha256()
    for rel in sorted(files):
        content = files[rel]
        digest.update(rel.encode() + b"\0" + hashlib.sha256(content).hexdigest().encode() + b"\n")
        target = os.path.join(path, rel)
        if ensure_dir(os.path.dirname(target), dir_mode, check):
            changed = True
        current = None
        if os.path.isfile(target):
            with open(target, "rb") as handle:
                current = handle.read()
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


def extract_startup(startup_dir, image, in_image):
    """Copy the startup scripts out of the image into startup_dir (atomically: a temporary sibling renamed)."""
    parent = os.path.dirname(startup_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=os.path.basename(startup_dir) + ".tmp.", dir=parent)
    cid = None
    try:
        cid = subprocess.run(["docker", "create", "--entrypoint", "/bin/true", image], check=True,
                             capture_output=True, text=True).stdout.strip()
        subprocess.run(["docker", "cp", "%s:%s/." % (cid, in_image.rstrip("/")), tmp + "/"], check=True,
                       capture_output=True, text=True)
        if not os.path.isfile(os.path.join(tmp, "boot.sh")):
            raise ValueError("%s has no boot.sh in %s" % (image, in_image))
        for root, dirs, names in os.walk(tmp):
            for name in dirs + names:
                full = os.path.join(root, name)
                if not os.path.islink(full):
                    os.chmod(full, os.stat(full).st_mode & ~0o022)
        os.chmod(tmp, 0o755)
        os.rename(tmp, startup_dir)
        tmp = None
    except subprocess.CalledProcessError as exc:
        raise ValueError("cannot copy the startup scripts out of %s: %s" % (image, (exc.stderr or "").strip()))
    finally:
        if cid:
            subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=False)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def main():
    if sys.argv[1:] in ([], ["-"]):
        spec = json.load(sys.stdin)
    else:
        with open(sys.argv[1]) as handle:
            spec = json.load(handle)
    startup_dir = spec["startup_dir"]
    extracted = False
    if spec.get("extract") and not os.path.isfile(os.path.join(startup_dir, "boot.sh")):
        try:
            extract_startup(startup_dir, spec["extract"]["image"], spec["extract"]["in_image"])
            extracted = True
        except (OSError, ValueError) as exc:
            print(json.dumps({"failed": True, "msg": str(exc)}))
            sys.exit(1)
    if not os.path.isdir(startup_dir):
        print(json.dumps({"failed": True, "msg": "startup scripts not found at %s" % startup_dir}))
        sys.exit(1)
    dir_mode = int(spec.get("dir_mode", "0750"), 8)
    file_mode = int(spec.get("file_mode", "0640"), 8)
    digests, changed = {}, []
    try:
        for extra in spec.get("dirs", []):
            if ensure_dir(extra, dir_mode, False):
                changed.append(extra)
        for container in spec["containers"]:
            container_changed, digest = sync_container(container, startup_dir, dir_mode, file_mode, False)
            digests[container["name"]] = digest
            if container_changed:
                changed.append(container["name"])
    except (OSError, ValueError, KeyError) as exc:
        print(json.dumps({"failed": True, "msg": "cannot render the config directories: %s" % exc}))
        sys.exit(1)
    print(json.dumps({"changed": changed, "digests": digests, "extracted": extracted}))


if __name__ == "__main__":
    main()
