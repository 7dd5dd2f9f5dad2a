"""The Docker engine through the SDK: a client that answers, and what a failing engine raises."""

from __future__ import annotations

import os

from ..errors import DockerError


def engine_errors() -> tuple[type[BaseException], ...]:
    """What a lost or failing engine raises through the SDK (a broken stream is urllib3's own)."""
    from docker.errors import DockerException
    from requests.exceptions import RequestException
    from urllib3.exceptions import HTTPError

    return DockerException, RequestException, HTTPError


def client():
    """A docker API client, or one clear DockerError when no engine answers."""
    import docker
    from docker.errors import DockerException

    try:
        api = docker.APIClient(**docker.utils.kwargs_from_env())
        api.ping()
    except DockerException as e:
        where = os.environ.get("DOCKER_HOST", "the default socket")
        raise DockerError(
            f"no Docker engine reachable at {where}: start dockerd or set DOCKER_HOST "
            "(README.md, 'The image')",
            hint="export DOCKER_HOST=unix:///run/tkv-dockerd/sock  (README.md, 'The image', starts one)",
        ) from e
    return api
