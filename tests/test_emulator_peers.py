"""The emulator driven by independent clients: boto3 for the identity provider, gql for GraphQL."""

import base64
import json

import boto3
import pytest
from botocore.exceptions import ClientError
from gql import Client as GqlClient
from gql import GraphQLRequest, gql
from gql.transport.requests import RequestsHTTPTransport


@pytest.fixture
def cognito(emulator):
    return boto3.client(
        "cognito-idp",
        endpoint_url=emulator.auth_url,
        region_name="eu-central-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )


def test_boto3_initiate_auth(emulator, cognito):
    body = json.loads(base64.b64decode(emulator.create_api_token(customer="acme")))
    out = cognito.initiate_auth(**body)
    result = out["AuthenticationResult"]
    assert result["TokenType"] == "Bearer"
    assert result["ExpiresIn"] == 3600
    assert "RefreshToken" not in result
    _header, payload, _sig = result["AccessToken"].split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["token_use"] == "access"
    assert claims["customer"] == "acme"
    assert claims["exp"] - claims["iat"] == 3600


def test_boto3_sees_cognito_errors(emulator, cognito):
    body = json.loads(base64.b64decode(emulator.create_api_token()))
    body["AuthParameters"]["REFRESH_TOKEN"] = "not-a-real-one"
    with pytest.raises(ClientError) as info:
        cognito.initiate_auth(**body)
    assert info.value.response["Error"]["Code"] == "NotAuthorizedException"
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    body["ClientId"] = "someone-else"
    with pytest.raises(ClientError) as info:
        cognito.initiate_auth(**body)
    assert info.value.response["Error"]["Code"] in {"ResourceNotFoundException", "NotAuthorizedException"}


def test_boto3_throttling(emulator, cognito):
    emulator.set_rate_limit("idp", (1, 3600.0))
    body = json.loads(base64.b64decode(emulator.create_api_token()))
    cognito.initiate_auth(**body)
    limited = boto3.client(
        "cognito-idp",
        endpoint_url=emulator.auth_url,
        region_name="eu-central-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=__import__("botocore.config").config.Config(retries={"max_attempts": 1}),
    )
    with pytest.raises(ClientError) as info:
        limited.initiate_auth(**body)
    assert info.value.response["Error"]["Code"] == "TooManyRequestsException"


def _gql(emulator):
    jwt = emulator.issue_jwt()
    transport = RequestsHTTPTransport(url=emulator.base_url, headers={"Authorization": f"Bearer {jwt}"})
    return GqlClient(transport=transport, fetch_schema_from_transport=True)


def test_gql_introspection_and_queries(emulator):
    with _gql(emulator) as session:
        result = session.execute(
            GraphQLRequest(
                "query Q($id: ID!) { finding(id: $id) { id_int title age } }", variable_values={"id": 4}
            )
        )
        assert result["finding"]["id_int"] == 4
        page = session.execute(
            gql("{ findings_view(first: 3, sort: [SCORE_DESC]) { edges { node { id_int score } } } }")
        )
        scores = [e["node"]["score"] for e in page["findings_view"]["edges"]]
        assert scores == sorted(scores, reverse=True)
    client = _gql(emulator)
    with client:
        schema = client.schema
        assert schema is not None
        assert "findings_view" in schema.query_type.fields
        assert "add_scoring_rule" in schema.mutation_type.fields


def test_gql_rejects_unknown_fields_locally(emulator):
    with _gql(emulator) as session, pytest.raises(Exception, match="nope"):
        session.execute(gql("{ finding(id: 1) { nope } }"))
