"""PAI's official DLC training image, looked up at deploy time (AIWorkspace ``ListImages``).

The DLC job provider calls :func:`resolve_image` in ``create`` when the plan pins no image
(``image_lookup``): ListImages with the labels of ``dlc_specs.yaml`` (``system.official=true``,
``system.supported.dlc=true``, ``system.chipType=GPU``) and the framework name, newest first; then
:func:`choose_image` (pure) keeps the images of the framework's training repository whose tag, read
with the PAI SDK's tag pattern, is a plain release GPU build with at least the CUDA the GPU
generation needs, and takes the newest: highest framework version, then CUDA, then creation time.
The answer is stored in the job's state (``image_resolved``), so a newer image never replaces it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from ..catalog import dlc_facts
from ..errors import CloudApiError
from ..lazy import LazyModule
from .credentials import sdk_config

if TYPE_CHECKING:
    from alibabacloud_aiworkspace20210204 import client as ws_client, models as ws
else:  # the SDK only when an image is looked up
    ws_client = LazyModule("alibabacloud_aiworkspace20210204.client")
    ws = LazyModule("alibabacloud_aiworkspace20210204.models")

#: ListImages pages read at most (100 images each): the official PyTorch set is a few dozen.
MAX_PAGES = 10
PAGE_SIZE = 100
_RELEASE = re.compile(r"\d+(\.\d+)*")


def default_workspace_client(region: str) -> Any:
    """The real AIWorkspace client of ``region`` (endpoint from the SDK's own rule); no network I/O."""
    return ws_client.Client(sdk_config(region, connect_timeout=10_000, read_timeout=30_000))


def _version(text: Optional[str]) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text or ""))


def _cuda(tag_cuda: Optional[str]) -> Optional[tuple[int, int]]:
    """``cu121`` -> (12, 1); ``cu118`` -> (11, 8); ``cu124`` -> (12, 4)."""
    if not tag_cuda or not re.fullmatch(r"cu\d{3,4}", tag_cuda):
        return None
    digits = tag_cuda[2:]
    return int(digits[:-1]), int(digits[-1])


def choose_image(images: list[Mapping[str, Any]], lookup: Mapping[str, Any]) -> Optional[str]:
    """The image URI to use from ListImages entries (``ImageUri``, ``GmtCreateTime``), or None."""
    official = dlc_facts().official_images
    need = tuple(int(p) for p in str(lookup["min_cuda"]).split("."))
    best: Optional[tuple] = None
    for img in images:
        uri = str(img.get("ImageUri") or "")
        repo, _, tag = uri.rpartition(":")
        if not tag or "/" in tag or repo.rsplit("/", 1)[-1] != lookup["repository"]:
            continue
        parts = official.parse_tag(tag)
        if not parts or parts.get("device") != "gpu" or not _RELEASE.fullmatch(parts.get("framework_version") or ""):
            continue  # CPU builds and variant images (accl, ngc, ...) are not the default
        cuda = _cuda(parts.get("cuda"))
        if cuda is None or cuda < need:
            continue
        key = (_version(parts["framework_version"]), cuda, str(img.get("GmtCreateTime") or ""), uri)
        if best is None or key > best:
            best = key
    return best[-1] if best else None


def list_official_images(client: Any, lookup: Mapping[str, Any], call: Callable[[str, Callable[[], Any]], Any]
                         ) -> list[dict[str, Any]]:
    """Every image ListImages returns for the lookup's labels and name (paged, newest first)."""
    out: list[dict[str, Any]] = []
    for page in range(1, MAX_PAGES + 1):
        req = ws.ListImagesRequest(labels=",".join(lookup["labels"]), name=lookup["name"], page_number=page,
                                   page_size=PAGE_SIZE, sort_by="GmtCreateTime", order="DESC", verbose=False)
        body = call("ListImages", lambda: client.list_images(req)).body
        images = [i.to_map() for i in (getattr(body, "images", None) or [])]
        out += images
        total = getattr(body, "total_count", None) or 0
        if len(images) < PAGE_SIZE or len(out) >= total:
            break
    return out


def resolve_image(client: Any, lookup: Mapping[str, Any], region: str,
                  call: Callable[[str, Callable[[], Any]], Any]) -> str:
    """The official image for ``lookup`` in ``region``; a clear error (exit 5) when none matches."""
    images = list_official_images(client, lookup, call)
    image = choose_image(images, lookup)
    if image is None:
        raise CloudApiError(
            f"AIWorkspace ListImages ({region}) lists no official {lookup['repository']} GPU image with CUDA >= "
            f"{lookup['min_cuda']} ({len(images)} images with labels {','.join(lookup['labels'])})",
            hint="pin one with dlc.image_tag (a tag the PAI console shows for the region) or set job.image")
    return image
