# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): builds on community.docker's GPL
# API client, like the modules that use it.
# SPDX-License-Identifier: GPL-3.0-or-later
"""community.docker's Engine API client for modules that do more than Docker (probe, render): connection problems
are raised as DockerUnavailable instead of ending the module, so the module can report them its own way."""

from __future__ import annotations

import json

from ansible_collections.community.docker.plugins.module_utils.common_api import AnsibleDockerClientBase


class DockerUnavailable(Exception):
    """The Docker engine could not be reached or read."""


class MotorDockerClient(AnsibleDockerClientBase):
    """API client on an existing AnsibleModule (whose argument spec includes DOCKER_COMMON_ARGS)."""

    def __init__(self, module):
        self.module = module
        self.fail_results = {}
        self.debug = False
        self.check_mode = module.check_mode
        super(MotorDockerClient, self).__init__()

    def fail(self, msg, **kwargs):
        raise DockerUnavailable(msg)

    def deprecate(self, msg, version=None, date=None, collection_name=None):
        self.module.deprecate(msg, version=version, date=date, collection_name=collection_name)

    def _get_params(self):
        return self.module.params


def job_containers(client, job_id):
    """The containers (running or not) labelled io.pymotor.job=<job_id>, as GET /containers/json lists them."""
    return client.get_json("/containers/json", params={
        "all": 1, "filters": json.dumps({"label": ["io.pymotor.job=%s" % job_id]})})
