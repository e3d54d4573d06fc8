"""The Docker engine itself, for the docker target, `doctor` and `gc`: reaching it, its status and local
images, pulling an image, and removing what killed runs left (containers and volumes labelled
`concurbench.run_id`). The Docker SDK is optional: it is imported where it is used.
"""

from __future__ import annotations

from ..util import first_line
from ..errors import ProvisionError
from .base import ImagePull, PullListener
from .containers import LABEL_RUN


def connect():
    """A client of the local Docker engine that has answered a ping, or a ProvisionError saying what to do."""
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env(timeout=60)
        client.ping()
        return client
    except DockerException as exc:
        raise ProvisionError(
            f"cannot reach the Docker engine ({first_line(exc)}). Is dockerd running (`docker info` should "
            f"answer; `sudo systemctl start docker`, or start dockerd by hand)? If it is, can this user open its "
            f"socket (/var/run/docker.sock: add the user to the docker group, or set DOCKER_HOST)? "
            f"The embedded and binaries targets need no Docker.", exc) from None


def engine_status() -> dict:
    """Whether a Docker engine answers, its version and the local image tags (for `doctor`)."""
    try:
        client = connect()
    except ProvisionError as exc:
        return {"reachable": False, "version": None, "error": exc.message, "images": []}
    try:
        version = client.version().get("Version")
        images = sorted(tag for image in client.images.list() for tag in image.tags)
        return {"reachable": True, "version": version, "error": None, "images": images}
    except Exception as exc:  # noqa: BLE001 - a status report never raises
        return {"reachable": False, "version": None, "error": first_line(exc), "images": []}
    finally:
        client.close()


def remove_leftover_containers(run_ids: set[str] | None = None) -> list[str]:
    """Remove containers labelled concurbench.run_id (only those runs' when run_ids is given), and
    their volumes; return the names of the containers removed."""
    from docker.errors import APIError, NotFound

    client = connect()
    removed = []
    try:
        for container in client.containers.list(all=True, filters={"label": LABEL_RUN}):
            if run_ids is not None and container.labels.get(LABEL_RUN) not in run_ids:
                continue
            volumes = volume_names(container)
            try:
                container.remove(force=True, v=True)
            except NotFound:
                pass
            removed.append(container.name)
            remove_volumes(client, volumes)
        for volume in client.volumes.list(filters={"label": LABEL_RUN}):
            if run_ids is None or volume.attrs.get("Labels", {}).get(LABEL_RUN) in run_ids:
                try:
                    volume.remove(force=True)
                except (NotFound, APIError):
                    pass  # still in use by a container of another run
    finally:
        client.close()
    return removed


def volume_names(container) -> list[str]:
    return [m["Name"] for m in container.attrs.get("Mounts", []) if m.get("Type") == "volume" and m.get("Name")]


def remove_volumes(client, names) -> None:
    from docker.errors import APIError, NotFound

    for name in names:
        try:
            client.volumes.get(name).remove(force=True)
        except (NotFound, APIError):
            pass


def ensure_image(client, image: str, listener: PullListener | None = None):
    """The local image, pulled first when missing; each layer's status goes to `listener` once (ImagePull)."""
    from docker.errors import APIError, DockerException, ImageNotFound
    from docker.utils import parse_repository_tag

    try:
        return client.images.get(image)
    except ImageNotFound:
        pass
    repository, tag = parse_repository_tag(image)
    tell = listener.on_pull if listener is not None else (lambda event: None)
    tell(ImagePull(image, "pulling"))
    seen: set[tuple] = set()
    try:
        for line in client.api.pull(repository, tag=tag or "latest", stream=True, decode=True):
            if "error" in line:
                raise APIError(line.get("error"))
            key = (line.get("id"), line.get("status"))
            if key not in seen:
                seen.add(key)
                tell(ImagePull(image, line.get("status"), line.get("id")))
        return client.images.get(image)
    except DockerException as exc:
        detail = getattr(exc, "explanation", None) or first_line(exc)
        raise ProvisionError(
            f"cannot pull the image {image}: {first_line(detail)}. If this machine cannot reach the registry, "
            f"pull it where you can and bring it over (`docker pull {image} && docker save {image} -o image.tar`, "
            f"then here `docker load -i image.tar`), or name a local image with --image (`docker images`).",
            exc) from None
