"""What a failed OpenAPI call means and what the user should do: one classification, one fix table.

Every SDK (ECS, PAI-DLC, NAS) raises the same exception family (darabonba/tea ``ClientException``,
``ServerException``, ``ThrottlingException``; ``UnretryableException`` wrapping a network or
credentials failure). :class:`ApiErrorInfo` reads any of them; :func:`is_transient` says whether a
retry may help; :func:`fix_for` names the fix; :func:`cloud_error` is the user's exit-5 error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from ..errors import CloudApiError
from .credentials import CREDENTIALS_FIX


def clean_field(value: Any) -> Optional[str]:
    """The SDKs format missing fields as the string 'None'."""
    if value is None:
        return None
    text = str(value).strip()
    return None if text in ("", "None", "null") else text


@dataclass(frozen=True)
class ApiErrorInfo:
    """What an SDK exception says, whatever its class."""

    code: Optional[str]
    message: str
    request_id: Optional[str] = None
    status: Optional[int] = None
    retry_after_ms: Optional[int] = None  # the API's x-acs-retry-after header, milliseconds
    network: bool = False
    connect_failed: bool = False
    credentials: bool = False

    @classmethod
    def from_exception(cls, exc: BaseException) -> "ApiErrorInfo":
        inner = getattr(exc, "inner_exception", None)
        if inner is not None and getattr(inner, "code", None) is None and inner is not exc:
            return cls._from_cause(inner)
        code = clean_field(getattr(exc, "code", None))
        if code is None and not hasattr(exc, "code"):
            return cls._from_cause(exc)
        data = getattr(exc, "data", None)
        data = data if isinstance(data, dict) else {}
        status = getattr(exc, "status_code", None) or getattr(exc, "statusCode", None) or data.get("statusCode")
        request_id = clean_field(getattr(exc, "request_id", None)) or clean_field(data.get("RequestId") or data.get("requestId"))
        message = clean_field(getattr(exc, "message", None)) or clean_field(data.get("Message") or data.get("message")) or ""
        m = re.fullmatch(r"code: \d+, (.*?)(?: request id: \S*)?", message, re.S)
        if m:
            message = m.group(1)
        retry_after = getattr(exc, "retry_after", None)
        return cls(code=code, message=message or type(exc).__name__, request_id=request_id,
                   status=int(status) if isinstance(status, (int, float)) or str(status).isdigit() else None,
                   retry_after_ms=int(retry_after) if isinstance(retry_after, (int, float)) else None,
                   credentials=code in CREDENTIAL_CODES)

    @classmethod
    def _from_cause(cls, cause: BaseException) -> "ApiErrorInfo":
        name = type(cause).__name__
        text = f"{name}: {cause}" if str(cause) else name
        if name == "CredentialException" or name.startswith("Credentials"):  # OSS SDK: CredentialsFetchError
            return cls(code=None, message=text, credentials=True)
        network = (isinstance(cause, (OSError, TimeoutError, ConnectionError))
                   or name in ("RetryError", "ConnectionError", "UnretryableException") or "Timeout" in name)
        return cls(code=None, message=text, network=network, connect_failed=name in ("ConnectTimeout",
                                                                                    "ConnectionError"))

    @property
    def detail(self) -> str:
        return f"{self.code}: {self.message}" if self.code and self.code not in self.message else self.message


CREDENTIAL_CODES = frozenset({
    "InvalidAccessKeyId.NotFound", "InvalidAccessKeyId", "InvalidAccessKeyId.Inactive",
    "SignatureDoesNotMatch", "IncompleteSignature", "InvalidSecurityToken.Expired",
    "InvalidSecurityToken.Malformed", "InvalidSecurityToken.MismatchWithAccessKey",
})
_THROTTLED = re.compile(r"^Throttling|TooManyRequests|RequestLimitExceeded|FlowControl", re.I)
_UNAVAILABLE = re.compile(r"^ServiceUnavailable|^SystemBusy|^ServiceBusy|^ServerBusy|^RequestTimeout", re.I)
_INTERNAL = re.compile(r"^InternalError|^InternalServerError|^UnknownError", re.I)
_NOT_FOUND = re.compile(r"not.?found|not.?exist", re.I)
_PERMISSION = re.compile(r"^Forbidden|^NoPermission|AccessDenied|Unauthorized|NotAuthorized", re.I)
_REGION = re.compile(r"^InvalidRegion|^InvalidZoneId\.NotFound", re.I)


def is_throttled(info: ApiErrorInfo) -> bool:
    return bool(info.status == 429 or info.retry_after_ms or _THROTTLED.search(info.code or ""))


def is_transient(info: ApiErrorInfo, *, idempotent: bool = True) -> bool:
    """Worth retrying. A non-idempotent call (CreateJob) is retried only when the API surely did not
    run it: throttled, 503 / ServiceUnavailable, or the connection was never made."""
    if info.credentials:
        return False
    if is_throttled(info) or info.status == 503 or _UNAVAILABLE.search(info.code or "") or info.connect_failed:
        return True
    if not idempotent:
        return False
    return bool(info.network or info.status in (500, 502, 504) or _INTERNAL.search(info.code or ""))


def may_have_run(info: ApiErrorInfo) -> bool:
    """A failure after which a non-idempotent call may have been accepted (do not blindly re-run)."""
    return not is_transient(info, idempotent=False) and bool(
        info.network or info.status in (500, 502, 504) or _INTERNAL.search(info.code or ""))


def is_not_found(info: ApiErrorInfo) -> bool:
    """The entity named does not exist: HTTP 404, or 'not found' / 'not exist' in code or message (DLC
    documents no code for it)."""
    if info.network or info.credentials:
        return False
    return info.status == 404 or bool(_NOT_FOUND.search(f"{info.code or ''} {info.message}"))


def is_permission(info: ApiErrorInfo) -> bool:
    return info.status == 403 or bool(_PERMISSION.search(info.code or ""))


#: (service or "*", pattern over "code message", what to fix): first match wins.
FIXES: tuple[tuple[str, re.Pattern, str], ...] = (
    ("*", re.compile(r"Throttling|TooManyRequests|FlowControl", re.I),
     "the API kept throttling: wait a minute and retry later, and run fewer trainstack commands or stacks at once"),
    ("*", re.compile(r"InvalidAccessKeyId|SignatureDoesNotMatch|InvalidCredentials|IncompleteSignature|"
                     r"InvalidSecurityToken|credential", re.I), CREDENTIALS_FIX),
    ("ecs", _REGION, "check the region id (`trainstack catalog` lists the known regions)"),
    ("oss", re.compile(r"NoSuchBucket", re.I),
     "the stack's bucket does not exist (yet): deploy the stack with `pulumi up`, or check the region"),
    ("dlc", re.compile(r"workspace", re.I),
     "check that dlc.workspace_id exists in this region and that you are a member (PAI ListWorkspaces), or leave "
     "it empty so trainstack creates a workspace; a quota (dlc.resource_id) must be attached to that workspace"),
    ("dlc", _PERMISSION,
     "grant the caller PAI-DLC rights (RAM policy AliyunPAIDLCFullAccess, or the workspace role Algorithm "
     "Developer / Administrator) and make sure PAI is activated in this region"),
    ("*", re.compile(r"InsufficientBalance|Arrear|Overdue|NotEnoughBalance", re.I),
     "top up the account: pay-as-you-go resources need a positive balance"),
    ("dlc", re.compile(r"quota|Exceed|Insufficient|NoStock|OutOfStock|NotEnough|Resource.?Limit|LimitExceeded", re.I),
     "public resources allow at most 2 GPUs and 8 vCPUs per job unless your account manager raises the limit: ask "
     "for more, choose a smaller ECS spec, or run on a resource quota (dlc.resource_id); for a quota job make "
     "ResourceConfig fit the quota's free nodes"),
    ("dlc", re.compile(r"image", re.I),
     "check that the image exists in this region and that its tag is one you pinned (dlc.image_tag / job.image); "
     "list official tags with PAI ListImages"),
    ("dlc", re.compile(r"EcsSpec|InstanceType", re.I),
     "use an ECS spec DLC offers in this region (PAI ListEcsSpecs), e.g. pin resources.instance_types"),
    ("dlc", re.compile(r"Invalid|Missing|Illegal|Malformed", re.I),
     "a request field was rejected: compare the message with the request shown by `trainstack plan` and fix the "
     "profile value it comes from"),
)
DEFAULT_FIX = ("look the code up with the request id in the Alibaba Cloud troubleshooting center "
               "(https://api.aliyun.com/troubleshoot)")


#: What to grant when a call is refused, per service: ``{api}`` is the call.
PERMISSION_FIXES = {
    "ecs": "grant the RAM user or role ecs:{api} (the system policy AliyunECSReadOnlyAccess covers every call "
           "trainstack makes), then retry",
    "oss": "grant the RAM user or role oss:ListObjects and oss:GetObject on the stack's bucket (the system policy "
           "AliyunOSSReadOnlyAccess covers them), then retry",
}


def fix_for(info: ApiErrorInfo, service: str, api: str = "") -> str:
    if is_permission(info) and service in PERMISSION_FIXES:
        return PERMISSION_FIXES[service].format(api=api)
    if info.credentials:
        return CREDENTIALS_FIX
    if info.network:
        return f"check network access (proxy, DNS) to the {service.upper()} endpoint, then retry"
    text = f"{info.code or ''} {info.message}"
    for scope, pattern, fix in FIXES:
        if scope in ("*", service) and pattern.search(text):
            return fix
    return DEFAULT_FIX


def cloud_error(service: str, api: str, region: str, exc: BaseException, *, what: str = "",
                attempts: int = 1) -> CloudApiError:
    """The user's exit-5 error for a failed call: the call, what went wrong, and the fix."""
    info = ApiErrorInfo.from_exception(exc)
    where = f"{api} ({region}{', ' + what if what else ''})"
    if info.credentials:
        head = f"{where} failed: credentials were rejected or not found: {info.detail}"
    elif is_permission(info):
        head = f"{where} failed: permission denied: {info.detail}"
    elif _REGION.search(info.code or ""):
        head = f"{where} failed: the region is not valid for {service.upper()}: {info.detail}"
    elif info.network:
        head = f"{where} failed after {attempts} attempts: cannot reach the {service.upper()} API: {info.detail}"
    elif is_transient(info):
        head = f"{where} failed after {attempts} attempts: {info.detail}"
    else:
        head = f"{where} failed: {info.detail}"
    if info.request_id:
        head += f" (request id {info.request_id})"
    return CloudApiError(head, hint=fix_for(info, service, api))


# ---- capacity: "no stock here", the errors `trainstack up` answers by trying the next candidate ----------------

#: The ECS API reference as Alibaba publishes it in its docs repository (AlibabaCloudDocs/ecs at 322eaab8,
#: ``intl.en-US/API Reference/Instances/RunInstances.md`` and ``.../Resource assurance/CreateCapacityReservation.md``).
_RUN = "AlibabaCloudDocs/ecs@322eaab8 intl.en-US/API Reference/Instances/RunInstances.md"
_CCR = "AlibabaCloudDocs/ecs@322eaab8 intl.en-US/API Reference/Resource assurance/CreateCapacityReservation.md"
_ALT = ("AlibabaCloudDocs/ecs@322eaab8 intl.en-US/SDK Reference/Java example/Query recommended instance types.md:209 "
        "(Alibaba's own list of codes after which to try another instance type)")


@dataclass(frozen=True)
class CapacityCode:
    """An error code meaning "this type cannot be had in this zone now", with where Alibaba says so."""

    code: str
    meaning: str
    sources: tuple[str, ...]


#: Codes after which another zone or type may succeed; everything else (quota, balance, a bad
#: request, credentials) is not a stock problem and stops `trainstack up` with its fix (exit 5).
#: Checked and left out: ``OperationDenied.ZoneNotOnSale`` (in no RunInstances, CreateInstance or
#: CreateCapacityReservation error table); ``QuotaExceed.ElasticQuota`` (an account quota: another
#: zone does not raise it; its fix is a quota increase).
CAPACITY_CODES: dict[str, CapacityCode] = {c.code: c for c in (
    CapacityCode("OperationDenied.NoStock", "the type is sold out in the zone",
                 (f"{_RUN}:647", f"{_RUN}:669", f"{_CCR}:110", _ALT)),
    CapacityCode("Zone.NotOnSale", "the zone no longer sells the resource", (f"{_RUN}:548", f"{_RUN}:645",
                                                                             f"{_CCR}:113", _ALT)),
    CapacityCode("InvalidResourceType.NotSupported", "no zone supports the requested configuration now",
                 ("AlibabaCloudDocs/ecs@322eaab8 intl.zh-CN/API 参考/实例/RunInstances.md:312", _ALT)),
    CapacityCode("InstanceType.Offline", "the type is retired or short of supply", (f"{_RUN}:649", _ALT)),
    CapacityCode("InvalidInstanceType.ZoneNotSupported", "the zone does not offer the type", (f"{_RUN}:648",)),
    CapacityCode("OperationDenied.ZoneNotAllowed", "instances cannot be created in the zone", (f"{_RUN}:637",)),
    CapacityCode("Zone.NotOpen", "the account may not buy resources in the zone yet", (f"{_RUN}:644", f"{_CCR}:109")),
)}

#: ``Code: X`` (tea SDK errors the provider wraps), ``ErrorCode: X`` (the classic Go SDK), ``"Code":"X"`` (JSON)
_CODE_IN_TEXT = re.compile(r"""(?:\bError)?Code"?\s*[:=]\s*"?([A-Za-z][A-Za-z0-9]*(?:\.[A-Za-z0-9]+)+)""")


def capacity_code(text: str) -> Optional[CapacityCode]:
    """The capacity error a provider or SDK message reports, if it reports one (the stated code
    first; a known code anywhere in the text otherwise)."""
    for code in _CODE_IN_TEXT.findall(text or ""):
        if code in CAPACITY_CODES:
            return CAPACITY_CODES[code]
    for code, entry in CAPACITY_CODES.items():
        if re.search(rf"(?<![\w.]){re.escape(code)}(?!\w|\.\w)", text or ""):
            return entry
    return None


def error_code(text: str) -> Optional[str]:
    """The first Alibaba error code a provider or SDK message states, if any."""
    found = _CODE_IN_TEXT.findall(text or "")
    return found[0] if found else None
