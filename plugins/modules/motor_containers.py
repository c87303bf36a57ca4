#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence; the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Render the config directories of, remove and start the containers of a PyMotor job on one host in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_containers
short_description: Internal - render the config of, start, stop or remove the containers of a PyMotor job on one host in one run
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Internal to the collection's playbooks and roles, not a public interface; its options and results may change in any release.
  - First renders the config directories (CONFIGMAP_PATH) given in O(configmap), without talking to the Docker
    engine unless the startup scripts must be copied out of the image (once per image id).
  - Stops the containers of O(stop) group after group, removes the containers listed in O(remove), then makes every container in O(containers) run, group after
    group (O(containers[].group), the tier; the containers of one group at the same time), through the Docker
    Engine API (the collection's own client on the Python standard library; no Docker SDK, no C(docker) CLI).
  - One module run per host for a whole tier of a deploy, where M(community.docker.docker_container) is one run
    per container (a Python start, an inspection and the API calls each time).
  - Idempotence is decided by the label C(io.pymotor.config-hash) (computed by the
    C(pymotor.ascend.motor_reconcile) filter from everything that shapes the container) - a container with the
    same hash is left alone when running and started when stopped; a container with another hash is removed and
    created again; a missing one is created. The image is never pulled.
  - The containers are never privileged, and use the host network.
extends_documentation_fragment:
  - pymotor.ascend.docker
attributes:
  check_mode:
    support: full
    description: Reports what would be created, recreated, started, restarted or removed.
  diff_mode:
    support: full
    description:
      - Before and after of every container that is created, recreated, started, stopped or removed (image,
        command, env, devices, volumes, labels, IPC mode, shm size, restart policy, state). Every env value is
        masked (C(********)) - env may hold API keys and tokens; env entries the image sets itself are left out.
options:
  configmap:
    description:
      - Config directories to render before anything is removed or started. Every directory gets a flat copy of the
        image's startup scripts (O(configmap.startup_dir), C(startup/*) and C(startup/roles/*) side by side, as
        PyMotor's ConfigMap lays them out) with the C(set_*_env) functions injected into the script that calls them
        (replaced in place, else prepended, as PyMotor's deployer does), plus the given files (C(user_config.json),
        C(env.json)).
        Files are written (atomically) only when their content, mode or owner differ; files no longer wanted are
        removed.
      - When O(configmap.startup_dir) has no C(boot.sh), the startup scripts are first copied out of
        O(configmap.image) (a created, never started container, the directory read as a tar stream from the
        Engine API archive endpoint, the container removed again) into a temporary sibling renamed into place - the directory is a cache per image id.
      - The file contents (O(configmap.containers[].files), user_config holds API keys and TLS secrets) are never
        logged, while errors are shown in full. Owner and group of everything written are root.
    type: dict
    suboptions:
      startup_dir:
        description: Directory of the startup scripts (a cache per image id).
        type: path
        required: true
      image:
        description: Image (id) to copy the startup scripts out of when O(configmap.startup_dir) has no C(boot.sh) (empty - never).
        type: str
        default: ''
      in_image:
        description: Directory of the startup scripts inside the image.
        type: path
        default: /tmp/motor/examples/deployer/startup
      dir_mode:
        description: Octal mode of the directories.
        type: str
        default: '0750'
      file_mode:
        description: Octal mode of the files.
        type: str
        default: '0640'
      dirs:
        description: Further directories to create (the log directories).
        type: list
        elements: path
        default: []
      containers:
        description: One config directory per container.
        type: list
        elements: dict
        default: []
        suboptions:
          name:
            description: Container name.
            type: str
            required: true
          path:
            description: The config directory (CONFIGMAP_PATH).
            type: path
            required: true
          files:
            description:
              - Relative path to the text of a file of the directory (C(user_config.json), C(env.json)).
              - Never logged - user_config holds API keys and TLS secrets.
            type: dict
            default: {}
          functions:
            description: Script basename to function name to the environment the function exports.
            type: dict
            default: {}
          prepend:
            description:
              - Script basename to a text put before it, unless the script already starts with the text's first line
                (the vLLM patch block PyMotor's deployer prepends to C(boot.sh)).
            type: dict
            default: {}
          secret_functions:
            description:
              - Like O(configmap.containers[].functions), for the variables with a secret-looking name (API keys,
                tokens, passwords), merged into the functions that O(configmap.containers[].functions) names.
              - Never logged, its values are masked wherever they would appear in the result.
            type: dict
            default: {}
          keep:
            description:
              - Relative paths of O(configmap.containers[].files) left as they are when the file exists (content,
                not mode or owner).
              - The C(user_config.json) of a container that keeps running - upstream's C(common.sh) copies a
                changed one into the container with C(cp -f) every 10 s, and its config watchers can read the
                truncated copy, fall back to the defaults and ignore the rest of the write.
            type: list
            elements: str
            default: []
  job_id:
    description:
      - Value of the C(io.pymotor.job) label; the result lists the state of every container of the job on the host.
    type: str
    required: true
  stop:
    description:
      - Groups of container names to stop, group after group (the containers of one group at the same time), before
        anything is removed or started - the day-2 C(stop) and C(destroy) order (engines, control plane, KV pool).
      - A container that is missing or not running is left alone.
    type: list
    elements: list
    default: []
  stop_timeout:
    description: Seconds a container of O(stop) has to exit after SIGTERM before it is killed.
    type: int
    default: 10
  remove:
    description:
      - Names of containers to remove (forcibly, anonymous volumes kept) before any container starts.
    type: list
    elements: str
    default: []
  containers:
    description:
      - The containers to run, in start order.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Container name.
        type: str
        required: true
      image:
        description: Image name or id; must be present on the host.
        type: str
        required: true
      command:
        description: Command (argv).
        type: list
        elements: str
        default: []
      env:
        description: Environment variables.
        type: dict
        default: {}
      secret_env:
        description:
          - Environment variables with a secret-looking name (API keys, tokens, passwords), merged into
            O(containers[].env).
          - Never logged, their values are masked wherever they would appear in the result.
        type: dict
        default: {}
      devices:
        description: Devices as C(host_path:container_path:permissions).
        type: list
        elements: str
        default: []
      volumes:
        description: Bind mounts as C(source:destination[:mode]).
        type: list
        elements: str
        default: []
      ipc_mode:
        description: IPC mode (for example C(host)); Docker's default when empty.
        type: str
      shm_size:
        description: Size of /dev/shm (for example C(4g)); Docker's default when empty.
        type: str
      cap_add:
        description: Capabilities added to Docker's default set (for example C(SYS_NICE)).
        type: list
        elements: str
        default: []
      security_opt:
        description: Docker security options (for example C(seccomp=unconfined)); Docker's defaults when empty.
        type: list
        elements: str
        default: []
      cap_drop:
        description: Capabilities dropped from Docker's default set (for example C(ALL)).
        type: list
        elements: str
        default: []
      read_only:
        description: Mount the container's root filesystem read-only.
        type: bool
        default: false
      memory:
        description: Memory limit (for example C(256g)); none when empty.
        type: str
      cpuset_cpus:
        description: CPUs the container may run on (C(HostConfig.CpusetCpus), for example C(0-23,48-71)); every CPU
          when empty.
        type: str
      stdin_open:
        description:
          - Keep the container's stdin open (C(docker run -i)); PyMotor's controller spins at 100% CPU when its
            stdin is at EOF.
        type: bool
        default: false
      labels:
        description: Labels; C(io.pymotor.config-hash) decides whether a container is recreated.
        type: dict
        default: {}
      restart_policy:
        description: Restart policy name.
        type: str
        default: unless-stopped
      init:
        description: Docker's init as PID 1 (C(docker run --init)).
        type: bool
        default: false
      log_driver:
        description: Logging driver.
        type: str
        default: json-file
      log_options:
        description: Logging driver options.
        type: dict
        default: {}
      group:
        description:
          - Start group (the tier). Consecutive containers of the same group start at the same time (one thread
            each); a group starts only after the previous one has started. Without it, one after the other.
        type: int
      restart:
        description:
          - Restart the container when it runs with the same config hash (C(restarted)); the deploy asks for it to
            repair what a running container lost elsewhere (the coordinator's KV registrations at a restarted
            conductor).
        type: bool
        default: false
      healthcheck:
        description:
          - Docker health check (C(docker ps) shows C(healthy) / C(unhealthy)); none when empty. The deploy gives
            the controller and the coordinator upstream's liveness probe (C(reconcile/probes.py)).
        type: dict
        suboptions:
          test:
            description: The check, as Docker's C(Healthcheck.Test) (for example C(["CMD", "python3", "probe.py"])).
            type: list
            elements: str
            required: true
          interval:
            description: Seconds between two checks.
            type: int
            default: 30
          timeout:
            description: Seconds after which a check counts as failed.
            type: int
            default: 30
          retries:
            description: Failed checks in a row that make the container unhealthy.
            type: int
            default: 3
          start_period:
            description: Seconds after the start during which a failed check does not count (the first success ends
              it).
            type: int
            default: 0
notes:
  - Runs on the Docker host (or reaches it through O(docker_host)).
seealso:
  - module: pymotor.ascend.motor_job_info
"""

EXAMPLES = r"""
- name: Render the config directory of an engine and start it
  pymotor.ascend.motor_containers:
    job_id: demo
    configmap:
      startup_dir: /var/cache/pymotor/startup/sha256-0123
      image: sha256:0123
      containers:
        - name: demo-p0-0
          path: /etc/pymotor/demo/demo-p0-0
          files: {user_config.json: "{}\n", env.json: "{}\n"}
          functions: {engine.sh: {set_prefill_env: {ROLE: prefill}}}
    containers:
      - name: demo-p0-0
        image: pymotor:latest
        command: [bash, -c, "source $CONFIGMAP_PATH/boot.sh"]
        env: {ROLE: prefill}
        devices: ["/dev/davinci0:/dev/davinci0:rwm"]
        volumes: ["/etc/pymotor/demo/demo-p0-0:/etc/pymotor/demo/demo-p0-0:ro"]
        ipc_mode: host
        labels: {io.pymotor.job: demo, io.pymotor.config-hash: 0123abcd}

- name: Stop the engines, then the control plane of a job, and remove them
  pymotor.ascend.motor_containers:
    job_id: demo
    stop: [[demo-p0-0, demo-d0-0], [demo-controller, demo-coordinator]]
    stop_timeout: 30
    remove: [demo-p0-0, demo-d0-0, demo-controller, demo-coordinator]
"""

RETURN = r"""
configmap:
  description: What the render of O(configmap) did.
  returned: when O(configmap) is given
  type: dict
  contains:
    changed_dirs:
      description: Names of the containers (and the extra directories) whose directory changed.
      type: list
      elements: str
      sample: [/var/log/pymotor/demo/demo-p0-0, demo-p0-0]
    digests:
      description: Container name to a sha256 over the relative paths and file hashes of its directory.
      type: dict
      sample: {demo-p0-0: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08}
    extracted:
      description: Whether the startup scripts were copied out of the image in this run.
      type: bool
      sample: false
containers:
  description: What was done with each container of O(containers), in order.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Container name.
      type: str
    action:
      description: C(created), C(recreated), C(started), C(restarted) or C(unchanged).
      type: str
    id:
      description: Container id (empty in check mode for a container that would be created).
      type: str
  sample:
    - {name: demo-p0-0, action: created, id: 3f2a9c0e1b7d5a8e}
    - {name: demo-d0-0, action: unchanged, id: 8c1e0f3b2a6d4c9e}
stopped:
  description: The containers of O(stop) that were running and were stopped (in check mode - would be).
  returned: always
  type: list
  elements: str
  sample: [demo-p0-0, demo-controller]
removed:
  description: The containers of O(remove) that existed and were removed.
  returned: always
  type: list
  elements: str
  sample: [demo-p1-0]
states:
  description:
    - State (C(running), C(exited), ...) of every container of the job on the host after the run; empty when the
      run only rendered (O(containers), O(stop) and O(remove) empty, the Docker engine is not asked).
  returned: always
  type: dict
  sample: {demo-p0-0: running, demo-d0-0: running, demo-p1-0: exited}
diff:
  description: Before and after of every container that changes, env values masked (diff mode).
  returned: in diff mode, when O(containers), O(stop) or O(remove) is given
  type: dict
  sample:
    before: {demo-p0-0: {state: exited}}
    after: {demo-p0-0: {image: 'pymotor:latest', env: {ROLE: '********'}, labels: {io.pymotor.config-hash: 0123abcd},
                        state: running}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_arguments import (
    CONTAINERS_ARGUMENT_SPEC,
    DOCKER_CONNECTION_REQUIRED_TOGETHER,
)
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_start import apply


def main():
    # The action plugin runs apply() as a standard-library script; this path serves connections without pipelining.
    module = AnsibleModule(argument_spec=CONTAINERS_ARGUMENT_SPEC, supports_check_mode=True,
                           required_together=DOCKER_CONNECTION_REQUIRED_TOGETHER)
    result = apply(module.params, module.check_mode, module._diff)
    if result.get("failed"):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
