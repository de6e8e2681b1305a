"""A small OpenID Connect provider for tests, built from authlib's server components
(``AuthorizationServer`` + ``AuthorizationCodeGrant`` with the ``OpenIDCode`` and PKCE
``CodeChallenge`` extensions), served on loopback by a Starlette app in a uvicorn thread, with
its own RSA signing key.

    GET  /.well-known/openid-configuration   discovery metadata (issuer = the base URL)
    GET  /jwks                               the public signing key
    GET  /userinfo                           the signed-in user's claims, for its access token
    GET  /authorize                          no login form: signs in ``provider.user`` at
                                             once and redirects back with a code
    POST /token                              code (+ PKCE verifier, client secret) -> tokens

Attacks are knobs on the provider: ``claims`` are merged into the next ID tokens (another
``iss`` or ``aud``), ``signing_key`` signs them with another key.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from authlib.common.security import generate_token
from authlib.oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, OAuth2Request
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload, JsonRequest
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oidc.core import UserInfo
from authlib.oidc.core.grants import OpenIDCode
from joserfc.jwk import RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.kit.host import free_port


@dataclass
class User:
    sub: str
    email: str
    email_verified: bool = True


@dataclass
class Client(ClientMixin):
    client_id: str
    client_secret: str
    redirect_uris: list[str]

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uris[0]

    def get_allowed_scope(self, scope: str) -> str:
        return " ".join(s for s in scope.split() if s in ("openid", "email", "profile"))

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return client_secret == self.client_secret

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == "authorization_code"


@dataclass
class Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: User
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    auth_time: int = field(default_factory=lambda: int(time.time()))

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_nonce(self) -> str | None:
        return self.nonce

    def get_auth_time(self) -> int:
        return self.auth_time

    def get_acr(self) -> None:
        return None

    def get_amr(self) -> None:
        return None


class _Request(OAuth2Request):
    def __init__(self, method: str, uri: str, headers: Any, query: dict[str, str],
                 form: dict[str, str]):
        super().__init__(method, uri, headers=headers)
        self._args, self._form = query, form
        self.payload = BasicOAuth2Payload({**query, **form})

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form


class Provider:
    """The provider; ``user`` is who signs in at the next /authorize."""

    def __init__(self, client_id: str, client_secret: str) -> None:
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.key = RSAKey.generate_key(2048, parameters={"kid": "test-1"})
        self.signing_key = self.key  # attack knob: sign with another key
        self.claims: dict[str, Any] = {}  # attack knob: merged into ID tokens
        self.user: User | None = None
        self.email_in_id_token = True  # False: only /userinfo says the email
        self.tokens: dict[str, User] = {}  # access token -> user, for /userinfo
        self.codes: dict[str, Code] = {}
        self.client = Client(client_id, client_secret, [])
        self.server = self._server()
        self.app = Starlette(routes=[
            Route("/.well-known/openid-configuration", self.metadata),
            Route("/jwks", self.jwks), Route("/authorize", self.authorize),
            Route("/token", self.token, methods=["POST"]), Route("/userinfo", self.userinfo)])
        self._uvicorn: Any = None

    def _server(self) -> AuthorizationServer:
        provider = self

        class Server(AuthorizationServer):
            def query_client(self, client_id: str) -> Client | None:
                return provider.client if client_id == provider.client.client_id else None

            def save_token(self, token: dict[str, Any], request: Any) -> None:
                provider.tokens[token["access_token"]] = request.user

            def create_oauth2_request(self, request: Any) -> Any:
                return request

            def create_json_request(self, request: Any) -> Any:
                return JsonRequest(request.method, request.uri, request.headers)

            def handle_response(self, status: int, body: Any, headers: Any) -> Response:
                if isinstance(body, dict):
                    body = json.dumps(body)
                return Response(body, status_code=status, headers=dict(headers))

            def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
                pass

        class Grant(AuthorizationCodeGrant):
            def save_authorization_code(self, code: str, request: Any) -> None:
                d = request.payload.data
                provider.codes[code] = Code(
                    code, request.client.client_id, d.get("redirect_uri", ""), d.get("scope", ""),
                    request.user, d.get("nonce"), d.get("code_challenge"),
                    d.get("code_challenge_method"))

            def query_authorization_code(self, code: str, client: Client) -> Code | None:
                c = provider.codes.get(code)
                return c if c and c.client_id == client.client_id else None

            def delete_authorization_code(self, code: Code) -> None:
                provider.codes.pop(code.code, None)

            def authenticate_user(self, code: Code) -> User:
                return code.user

        class OpenID(OpenIDCode):
            def exists_nonce(self, nonce: str, request: Any) -> bool:
                return False

            def resolve_client_private_key(self, client: Client) -> Any:
                return provider.signing_key

            def get_client_algorithm(self, client: Client) -> str:
                return "RS256"

            def get_encode_header(self, client: Client) -> dict[str, str]:
                return {"alg": "RS256", "kid": str(provider.signing_key.kid)}

            def get_client_claims(self, client: Client) -> dict[str, Any]:
                return {"iss": provider.issuer, "aud": [client.client_id],
                        "exp": int(time.time()) + 300, **provider.claims}

            def generate_user_info(self, user: User, scope: str) -> UserInfo:
                if not provider.email_in_id_token:
                    return UserInfo(sub=user.sub)
                return provider.user_info(user)

        server = Server()
        server.register_token_generator("default", BearerTokenGenerator(
            lambda **kw: generate_token(42)))
        server.register_grant(Grant, [OpenID(require_nonce=True), CodeChallenge(required=True)])
        return server

    @staticmethod
    def user_info(user: User) -> UserInfo:
        return UserInfo(sub=user.sub, email=user.email, email_verified=user.email_verified)

    # ------------------------------------------------------------ endpoints

    async def metadata(self, request: Request) -> Response:
        i = self.issuer
        return JSONResponse({
            "issuer": i, "authorization_endpoint": i + "/authorize",
            "token_endpoint": i + "/token", "jwks_uri": i + "/jwks",
            "userinfo_endpoint": i + "/userinfo",
            "response_types_supported": ["code"], "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
            "scopes_supported": ["openid", "email"]})

    async def jwks(self, request: Request) -> Response:
        return JSONResponse({"keys": [self.key.as_dict(private=False)]})

    async def userinfo(self, request: Request) -> Response:
        auth = request.headers.get("authorization", "")
        user = self.tokens.get(auth[7:]) if auth.startswith("Bearer ") else None
        if user is None:
            return JSONResponse({"error": "invalid_token"}, status_code=401)
        return JSONResponse(dict(self.user_info(user)))

    async def _req(self, request: Request) -> _Request:
        form = dict(await request.form()) if request.method == "POST" else {}
        return _Request(request.method, str(request.url), request.headers,
                        dict(request.query_params), {k: str(v) for k, v in form.items()})

    async def authorize(self, request: Request) -> Response:
        from authlib.oauth2 import OAuth2Error

        req = await self._req(request)
        try:
            grant = self.server.get_consent_grant(req, end_user=self.user)
        except OAuth2Error as e:
            return self.server.handle_error_response(req, e)  # type: ignore[no-any-return]
        resp: Response = self.server.create_authorization_response(req, grant_user=self.user,
                                                                   grant=grant)
        return resp

    async def token(self, request: Request) -> Response:
        resp: Response = self.server.create_token_response(await self._req(request))
        return resp

    # ------------------------------------------------------------ serving

    def start(self) -> Provider:
        import uvicorn

        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_config=None,
                                access_log=False)
        self._uvicorn = uvicorn.Server(config)
        t = threading.Thread(target=self._uvicorn.run, daemon=True)
        t.start()
        deadline = time.monotonic() + 30
        while not self._uvicorn.started:
            if time.monotonic() > deadline or not t.is_alive():
                raise RuntimeError("the test OIDC provider did not start")
            time.sleep(0.02)
        self._thread = t
        return self

    def stop(self) -> None:
        self._uvicorn.should_exit = True
        self._thread.join(timeout=10)
