"""Checks that a family's recorded quotes carry the facts they are cited for (catalog load time).

A fact such as ``boot_mode: uefi`` or ``pcie_gen: 4`` is only as good as the sentence behind it:
each one needs a citation of the right kind, from a source the family cites, whose words contain
what the claim needs (``Citation.supports``). The placement engine's refusal reasons cite the same
records, so a reason never rests on a source that does not say it.
"""

from __future__ import annotations

from typing import Iterable

from .models import TRAINING_INTERCONNECTS, InstanceFamily


def gpu_stem(name: str) -> str:
    """The part name a family doc uses for a catalog GPU: ``A100-80G`` -> ``A100``, ``T4`` -> ``T4``."""
    return name.split("-")[0]


def family_citation_errors(f: InstanceFamily, tags: Iterable[str]) -> list[str]:
    tags = set(tags)
    out: list[str] = []
    for c in f.citations:
        where = f"family {f.name} citation {c.fact}"
        if c.source not in tags:
            out.append(f"{where} cites unknown source {c.source!r}")
        elif c.source not in f.sources:
            out.append(f"{where}: source {c.source} is not among the family's sources")
        subject = gpu_stem(f.gpu) if f.gpu else None
        if c.claim == "gpu-part" and subject is None:
            out.append(f"{where}: a gpu-part quote needs the family's GPU")
        elif not c.supports(c.claim, subject):
            out.append(f"{where}: quote {c.quote!r} does not carry a {c.claim} claim"
                       + (f" naming {subject}" if c.claim == "gpu-part" else ""))
        if c.claim == "nvlink-required-for-transformer" and f.interconnect not in TRAINING_INTERCONNECTS:
            out.append(f"{where}: Alibaba's NVLink warning is cited for a family without NVLink")
    if f.boot_mode is not None and f.cite("boot_mode", "boot-mode") is None:
        out.append(f"family {f.name}: boot_mode {f.boot_mode} has no boot_mode citation")
    if f.boot_mode == "uefi" and (c := f.cite("boot_mode")) is not None and "UEFI" not in c.quote:
        out.append(f"family {f.name}: boot_mode uefi but its quote does not say UEFI")
    if (f.pcie_gen is None) != (f.pcie_gbs is None):
        out.append(f"family {f.name}: pcie_gen and pcie_gbs come together (one statement of the link)")
    if f.pcie_gen is not None:
        c = f.cite("pcie", "gpu-link-pcie")
        if c is None:
            out.append(f"family {f.name}: pcie_gen {f.pcie_gen} has no pcie citation")
        elif f"Gen{f.pcie_gen}" not in c.quote or f"{f.pcie_gbs:g}" not in c.quote:
            out.append(f"family {f.name}: pcie citation does not state Gen{f.pcie_gen} and {f.pcie_gbs:g} GB/s")
        if f.interconnect != "pcie":
            out.append(f"family {f.name}: pcie link figures on a family whose interconnect is {f.interconnect}")
    return out
