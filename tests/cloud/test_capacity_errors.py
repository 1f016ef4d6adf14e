"""The stock error table (trainstack/cloud/errors.py): every code is found in every shape a provider or SDK
message takes, nothing else is taken for a stock error, and every entry says where Alibaba documents it."""

from __future__ import annotations

import re

from hypothesis import given, strategies as st

from trainstack.cloud.errors import CAPACITY_CODES, capacity_code, error_code

SHAPES = (
    # tea SDK error inside the provider's wrapped error (RpcPost), as `pulumi up` prints it
    "creating urn:pulumi:dev::trainstack::x: 1 error occurred:\n\t* [ERROR] terraform-provider-alicloud/alicloud/"
    "resource_alicloud_instance.go:1254: Resource alicloud_instance RunInstances Failed!!! [SDK alibaba-cloud-sdk-go "
    "ERROR]:\nSDKError:\n   StatusCode: 403\n   Code: {code}\n   Message: code: 403, {message}\n   Data: {{}}",
    # the classic Go SDK's ServerError
    "SDK.ServerError\nErrorCode: {code}\nRecommend: https://api.aliyun.com/troubleshoot?q={code}\nRequestId: R\n"
    "Message: {message}",
    # a JSON body
    '{{"RequestId":"R","Code":"{code}","Message":"{message}"}}',
    # a bare mention at the end of a sentence
    "RunInstances failed with {code}.",
)
messages = st.text(alphabet=st.characters(whitelist_categories=("L", "N", "Zs")), max_size=60)
codes = st.from_regex(r"\A[A-Z][a-zA-Z]{2,12}(\.[A-Z][a-zA-Z]{2,12}){1,2}\Z")


@given(code=st.sampled_from(sorted(CAPACITY_CODES)), shape=st.sampled_from(SHAPES), message=messages)
def test_every_stock_code_is_found_in_every_message_shape(code, shape, message):
    text = shape.format(code=code, message=message)
    assert capacity_code(text).code == code


@given(code=codes, shape=st.sampled_from(SHAPES), message=messages)
def test_no_other_code_is_a_stock_error(code, shape, message):
    if code in CAPACITY_CODES or any(c in message for c in CAPACITY_CODES):
        return
    text = shape.format(code=code, message=message)
    assert capacity_code(text) is None
    if "Code" in shape:
        assert error_code(text) == code


def test_quota_and_balance_errors_are_not_stock_errors():
    for code in ("QuotaExceed.ElasticQuota", "InvalidAccountStatus.NotEnoughBalance", "OperationDenied.ZoneNotOnSale",
                 "InvalidInstanceType.ValueNotSupported"):
        assert capacity_code(f"Code: {code}\nMessage: no") is None


def test_a_longer_code_that_starts_like_a_stock_code_is_not_one():
    assert capacity_code("Code: OperationDenied.NoStockAnywhere") is None
    assert capacity_code("see OperationDenied.NoStock.Detail") is None


def test_every_entry_names_where_alibaba_documents_it():
    for entry in CAPACITY_CODES.values():
        assert entry.meaning and entry.sources
        for source in entry.sources:
            assert re.search(r"AlibabaCloudDocs/ecs@[0-9a-f]{8} .+\.md(:\d+)?", source), source
        assert any("RunInstances" in s or "CreateCapacityReservation" in s for s in entry.sources)
