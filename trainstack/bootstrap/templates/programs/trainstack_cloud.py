"""trainstack node programs, shared: signed Alibaba Cloud RPC calls and stopping this instance.

RPC-style APIs (ECS, KMS) with signature version 1.0 (HMAC-SHA1), signed with the instance RAM
role's STS credentials from the metadata service, on the region's VPC endpoints (no internet
egress needed). A boot program, run on its own: ``trainstack_cloud.py stop-instance [--region R]``
stops this instance (StoppedMode=StopCharging), so a node whose other programs cannot be fetched
still stops billing. Stdlib only, Python 3.6 compatible.
"""

import base64
import hashlib
import hmac
import json
import os
import sys
import time
import uuid
from urllib.error import HTTPError, URLError
from urllib.parse import quote
from urllib.request import Request, urlopen

from trainstack_metadata import Metadata, MetadataError, log

ECS_API_VERSION = "2014-05-26"


def percent_encode(value):
    """RFC 3986 encoding as Alibaba Cloud's RPC signature requires (space -> %20, ~ kept)."""
    return quote(str(value), safe="~")


def sign_rpc(params, secret, method="GET"):
    canonical = "&".join("%s=%s" % (percent_encode(k), percent_encode(params[k])) for k in sorted(params))
    string_to_sign = "%s&%s&%s" % (method, percent_encode("/"), percent_encode(canonical))
    digest = hmac.new((secret + "&").encode(), string_to_sign.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def ecs_endpoint(region):
    return os.environ.get("TRAINSTACK_ECS_ENDPOINT") or "https://ecs-vpc.%s.aliyuncs.com" % region


def ecs_call(action, params, creds, endpoint, timeout=15.0):
    return rpc_call("ECS", ECS_API_VERSION, action, params, creds, endpoint, timeout)


def rpc_call(service, api_version, action, params, creds, endpoint, timeout=15.0):
    """One signed RPC call (signature version 1.0); RuntimeError with the API's code on failure."""
    query = dict(params)
    query.update({
        "Action": action, "Version": api_version, "Format": "JSON",
        "AccessKeyId": creds["AccessKeyId"], "SignatureMethod": "HMAC-SHA1",
        "SignatureVersion": "1.0", "SignatureNonce": str(uuid.uuid4()),
        "Timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    })
    if creds.get("SecurityToken"):
        query["SecurityToken"] = creds["SecurityToken"]
    query["Signature"] = sign_rpc(query, creds["AccessKeySecret"])
    url = endpoint.rstrip("/") + "/?" + "&".join(
        "%s=%s" % (percent_encode(k), percent_encode(v)) for k, v in sorted(query.items()))
    try:
        with urlopen(Request(url), timeout=timeout) as resp:
            return json.loads(resp.read().decode() or "{}")
    except HTTPError as exc:
        body = exc.read().decode(errors="replace")
        try:
            err = json.loads(body)
            detail = "%s: %s" % (err.get("Code"), err.get("Message"))
        except ValueError:
            detail = body[:300]
        raise RuntimeError("%s %s failed (HTTP %s) %s" % (service, action, exc.code, detail))


def stop_instance(mode="StopCharging", region=None, attempts=3):
    """Stop this instance; StopCharging releases the GPUs so they stop billing."""
    md = Metadata()
    instance_id = md.require("meta-data/instance-id")
    region = region or md.require("meta-data/region-id")
    endpoint = ecs_endpoint(region)
    delay = float(os.environ.get("TRAINSTACK_RETRY_SECONDS", "5"))
    for attempt in range(1, attempts + 1):
        try:
            # fresh each try (STS credentials rotate); only the first try waits for the role
            creds = md.ram_credentials(wait=None if attempt == 1 else 0)
            answer = ecs_call("StopInstance", {"InstanceId": instance_id, "StoppedMode": mode,
                                               "ForceStop": "false"}, creds, endpoint)
            log("StopInstance %s (%s) accepted: request %s" % (instance_id, mode, answer.get("RequestId")))
            return 0
        except (MetadataError, RuntimeError, URLError, OSError, ValueError) as exc:
            log("StopInstance attempt %d/%d: %s" % (attempt, attempts, exc))
            if attempt < attempts:
                time.sleep(delay * attempt)
    return 1


def main(argv):
    if argv[:1] != ["stop-instance"] or len(argv) not in (1, 3) or (len(argv) == 3 and argv[1] != "--region"):
        log("usage: trainstack_cloud.py stop-instance [--region R]")
        return 2
    try:
        return stop_instance(region=argv[2] if len(argv) == 3 else None)
    except MetadataError as exc:  # no instance id or region: nothing to stop
        log(str(exc))
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
