"""Typed catalog records. Data lives in ``data/``; these models only say what a fact is.

Unknown is explicit: a field that no source states is ``None`` and the record lists it in
``unverified``. Nothing here is guessed.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

Architecture = Literal["pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell"]
Interconnect = Literal["nvlink", "nvswitch", "pcie", "unverified"]
RdmaKind = Literal["erdma", "roce", "none", "unverified"]
#: How ``usable_gib`` was obtained: PyTorch's own device total (public measurement), the
#: nvidia-smi total less ``usable_memory_allowance_mib`` (settings.yaml), or another part's
#: measurement assumed to hold (then ``usable_gib`` is listed in ``unverified``).
UsableBasis = Literal["torch-total", "nvidia-smi-less-allowance", "assumed"]

#: How a family's instances boot, where Alibaba's family doc states it: ``uefi`` = "the image's boot
#: mode must be UEFI" (the family only boots UEFI images); ``bios`` / ``uefi-preferred`` are kept for
#: families whose doc states them. ``None`` = the family doc states no boot-mode requirement.
BootMode = Literal["uefi", "bios", "uefi-preferred"]
#: What a recorded quote claims. Each kind names the words its quote must contain (``CLAIM_WORDS``),
#: so a citation can be checked against what it is cited for.
ClaimKind = Literal["boot-mode", "gpu-link-pcie", "gpu-part", "nvlink-required-for-transformer"]
CLAIM_WORDS: dict[str, tuple[str, ...]] = {
    "boot-mode": ("UEFI",),
    "gpu-link-pcie": ("PCIe",),
    "gpu-part": (),  # the quote names the family's GPU part (checked against InstanceFamily.gpu)
    "nvlink-required-for-transformer": ("Transformer", "NVLink", "PCIe"),
}

#: Interconnects on which multi-GPU training within one node is allowed.
TRAINING_INTERCONNECTS = ("nvlink", "nvswitch")
#: Node networks over which several nodes may train together (RDMA; kernel TCP never).
TRAINING_RDMA = ("erdma", "roce")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SourceRef(_Frozen):
    """A cited source (tag of ``sources.yaml``)."""

    tag: str
    title: str
    url: Optional[str] = None


class Citation(_Frozen):
    """The sentence one catalog fact rests on: a source tag, the exact words (short) and what they claim."""

    fact: str = Field(description="The field of the record the quote is for (boot_mode, interconnect, ...)")
    source: str = Field(description="Tag in sources.yaml")
    claim: ClaimKind
    quote: str = Field(min_length=1, max_length=400, description="The source's own words, verbatim")
    url: Optional[str] = Field(None, description="A more precise address than the source's own (an anchor)")

    def supports(self, claim: str, subject: Optional[str] = None) -> bool:
        """Whether this quote backs ``claim`` (its words are in it; a gpu-part quote names ``subject``)."""
        if claim != self.claim:
            return False
        words = CLAIM_WORDS[claim] + ((subject,) if claim == "gpu-part" and subject else ())
        return all(w.lower() in self.quote.lower() for w in words)


class GpuModel(_Frozen):
    """One GPU part: what it holds and how fast it computes."""

    name: str
    architecture: Architecture
    memory_gb: float = Field(description="Marketing capacity in GB as sold")
    memory_type: Optional[str] = None
    usable_gib: float = Field(description="Device total PyTorch sees on current drivers, GiB = 2^30 bytes; "
                                          "the CUDA context is counted by the estimator, not here")
    usable_basis: UsableBasis = Field("assumed", description="Where usable_gib comes from (see UsableBasis)")
    usable_source: Optional[str] = Field(
        None, description="Source tag of the figure usable_gib rests on; the catalog loader requires it")
    torch_total_gib: Optional[float] = Field(
        None, description="Lowest public PyTorch device total on current drivers; usable_gib never exceeds it")
    nvidia_smi_total_mib: Optional[int] = Field(None, description="nvidia-smi memory.total, MiB")
    memory_bandwidth_gbs: Optional[float] = None
    bf16_tflops: Optional[float] = Field(None, description="Dense (no sparsity) BF16 tensor TFLOPS")
    fp16_tflops: Optional[float] = None
    fp8_tflops: Optional[float] = None
    supports_bf16: bool
    supports_fp8: bool
    estimate_only: bool = Field(False, description="Not sold as an ECS type in the catalog; used for estimates")
    sources: tuple[str, ...]
    unverified: tuple[str, ...] = ()
    notes: Optional[str] = None


class InstanceFamily(_Frozen):
    """Facts shared by every size of one ECS family."""

    name: str
    gpu: Optional[str] = Field(description="GpuModel name; None when no source names the GPU")
    interconnect: Interconnect
    rdma: RdmaKind
    training: bool = Field(True, description="False for vGPU slices and non-training parts")
    bare_metal: bool = False
    boot_mode: Optional[BootMode] = Field(None, description="As the family doc states it; None = not stated")
    pcie_gen: Optional[int] = Field(None, ge=3, le=6, description="PCIe generation of each GPU's link, as stated")
    pcie_gbs: Optional[float] = Field(
        None, gt=0, description="GB/s of each GPU's PCIe link as the doc states it (both directions together)")
    deployment_set_low_latency: Optional[bool] = Field(
        None, description="LowLatency deployment-set support; None = unverified")
    jumbo_frames: Optional[bool] = Field(
        None, description="Jumbo frames (MTU 8500) documented for the family; None = unverified")
    status: Literal["available", "not-recommended", "contact-sales", "invitational-preview"] = "available"
    sources: tuple[str, ...]
    unverified: tuple[str, ...] = ()
    citations: tuple[Citation, ...] = Field((), description="The quotes single facts rest on")
    notes: Optional[str] = None

    @property
    def uefi_required(self) -> bool:
        """The family boots UEFI images only (its doc says so); the image plan follows it."""
        return self.boot_mode == "uefi"

    def cite(self, fact: str, claim: Optional[str] = None) -> Optional[Citation]:
        """The recorded quote for ``fact`` (of kind ``claim`` when given), or None."""
        return next((c for c in self.citations if c.fact == fact and (claim is None or c.claim == claim)), None)


class InstanceType(_Frozen):
    """One sellable ECS instance type."""

    name: str
    family: str
    vcpu: Optional[int] = Field(None, description="None = unverified")
    memory_gib: Optional[float] = Field(None, description="None = unverified")
    gpu_count: int
    eri_count: Optional[int] = Field(None, description="Elastic RDMA interfaces (EriQuantity); 0 = none")
    queue_pair_number_max: Optional[int] = Field(
        None, description="Queue pairs all ERIs of the instance share (DescribeInstanceTypes QueuePairNumber); "
                          "None = unverified offline")
    rdma_bandwidth_gbps: Optional[float] = None
    network_bandwidth_gbps: Optional[float] = None
    sources: tuple[str, ...]
    unverified: tuple[str, ...] = ()


class RegionPrice(_Frozen):
    """What one region charges for one type, with where the figure came from."""

    region: str
    instance_type: str
    on_demand_cny_per_hour: Optional[float] = Field(None, description="None = unknown; never 0")
    spot_cny_per_hour: Optional[float] = Field(None, description="Latest observed spot price, None offline")
    trade_cny_per_hour: Optional[float] = None
    currency: str = "CNY"
    zones: tuple[str, ...] = ()
    spot_zones: tuple[str, ...] = ()
    source: str
    as_of: str = Field(description="ISO date of the source")


class ResolvedInstance(_Frozen):
    """An instance type joined with its family and GPU, the shape the resolver and policies use."""

    type: InstanceType
    family: InstanceFamily
    gpu: Optional[GpuModel]

    @property
    def name(self) -> str:
        return self.type.name

    @property
    def gpu_count(self) -> int:
        return self.type.gpu_count

    @property
    def interconnect(self) -> Interconnect:
        return self.family.interconnect

    @property
    def rdma(self) -> RdmaKind:
        if self.family.rdma == "erdma" and self.type.eri_count == 0:
            return "none"
        return self.family.rdma

    @property
    def multi_gpu_training_ok(self) -> bool:
        """Whether GPUs inside one node may train together (NVLink/NVSwitch only)."""
        return self.family.interconnect in TRAINING_INTERCONNECTS

    @property
    def trainable(self) -> bool:
        return self.family.training and self.gpu is not None


#: Where a price comes from: Alibaba's public snapshot, another region's snapshot price (borrowed),
#: the team's price book, a `catalog refresh` of the account's API answers, or nowhere (unknown).
PriceSourceKind = Literal["snapshot", "borrowed-region", "price-book", "refresh", "none"]
#: What is priced: ECS nodes, PAI-DLC public-resource pods (a DLC spec), or a PAI resource quota.
PricedService = Literal["ecs", "dlc", "dlc-quota"]


class PriceQuote(_Frozen):
    """A price as the resolver uses it: the figure, and how much to trust it."""

    instance_type: str = Field(description="What is priced: ECS type, DLC spec or resource quota id")
    region: str
    service: PricedService = "ecs"
    per: Literal["node", "pod", "GPU"] = Field("node", description="The unit the hourly price is for")
    on_demand_cny_per_hour: Optional[float]
    spot_cny_per_hour: Optional[float]
    on_demand_from_region: Optional[str] = Field(None, description="Region whose price was borrowed")
    list_on_demand_cny_per_hour: Optional[float] = Field(
        None, description="The public list price (snapshot, refresh or borrowed) before the team's discount")
    discount_percent: Optional[float] = Field(None, description="The price book's discount on the list on-demand price")
    spot_discount_percent: Optional[float] = Field(None, description="The price book's discount applied to spot")
    spot_estimated: bool = True
    seen_in_region: bool = False
    zones: tuple[str, ...] = ()
    labels: tuple[str, ...] = Field((), description="What any use of this type rests on (on-demand or spot)")
    spot_labels: tuple[str, ...] = Field((), description="What a spot plan rests on besides ``labels``")
    as_of: Optional[str] = None
    source_kind: PriceSourceKind = "none"
    source: str = Field("", description="Whose figure it is, in the user's words (headline of every output)")
