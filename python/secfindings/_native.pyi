# Stub of the compiled module secfindings._native (checked by mypy.stubtest).
from typing import Any, final

__all__ = [
    "NativeClient",
    "NativeEmulator",
    "NativePages",
    "__version__",
    "build_operation",
    "catalog",
    "from_global_id",
    "input_objects",
    "prepare_request",
    "reset_log_cache",
    "to_global_id",
]

__version__: str

@final
class NativeClient:
    def __new__(
        cls,
        api_token: str | None = None,
        *,
        base_url: str | None = None,
        region: str | None = None,
        auth_url: str | None = None,
        jwt: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        max_retry_wait: float | None = None,
        proxy: str | None = None,
        ca_bundle: str | None = None,
        refresh_advisory: float | None = None,
        refresh_mandatory: float | None = None,
    ) -> NativeClient: ...
    @property
    def base_url(self) -> str: ...
    @property
    def auth_url(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    @property
    def exchanges(self) -> int: ...
    def close(self) -> None: ...
    def execute(
        self, query: str, variables: dict[str, Any] | None = None, operation_name: str | None = None
    ) -> Any: ...
    def execute_async(
        self, query: str, variables: dict[str, Any] | None = None, operation_name: str | None = None
    ) -> Any: ...
    def paginate(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        operation_name: str | None = None,
        path: str | None = None,
        page_size: int = 100,
        limit: int | None = None,
    ) -> NativePages: ...
    def call(self, name: str, args: dict[str, Any], fields: str | None = None) -> Any: ...
    def call_async(self, name: str, args: dict[str, Any], fields: str | None = None) -> Any: ...
    def paginate_operation(
        self,
        name: str,
        args: dict[str, Any],
        fields: str | None = None,
        page_size: int = 100,
        limit: int | None = None,
    ) -> NativePages: ...

@final
class NativePages:
    @property
    def cursor(self) -> str | None: ...
    def next_page(self) -> tuple[list[Any], dict[str, Any], list[str | None]] | None: ...
    def next_page_async(self) -> Any: ...

@final
class NativeEmulator:
    def __new__(
        cls,
        findings: int = 5000,
        seed: int = 7,
        port: int = 0,
        host: str = "127.0.0.1",
        jwt_lifetime: float = 3600.0,
        global_limit: tuple[int, float] | None = None,
        customer_limit: tuple[int, float] | None = None,
        token_limit: tuple[int, float] | None = None,
        idp_limit: tuple[int, float] | None = None,
        response_cache: bool = False,
    ) -> NativeEmulator: ...
    @property
    def base_url(self) -> str: ...
    @property
    def auth_url(self) -> str: ...
    @property
    def port(self) -> int: ...
    def create_api_token(self, customer: str = "acme", name: str = "default") -> str: ...
    def revoke_api_token(self, api_token: str) -> bool: ...
    def issue_jwt(self, customer: str = "acme", name: str = "default", lifetime: float = 3600.0) -> str: ...
    def expire_jwts(self) -> None: ...
    def set_jwt_lifetime(self, seconds: float) -> None: ...
    def set_rate_limit(self, scope: str, limit: tuple[int, float] | None = None) -> None: ...
    def inject(
        self,
        kind: str,
        count: int = 1,
        *,
        target: str = "api",
        status: int | None = None,
        retry_after: int | None = None,
        delay: float | None = None,
        error_type: str | None = None,
        message: str | None = None,
    ) -> None: ...
    def clear_faults(self) -> None: ...
    def stats(self) -> dict[str, int]: ...
    def reset_stats(self) -> None: ...
    def request_log(self) -> list[dict[str, Any]]: ...
    def clear_request_log(self) -> None: ...
    def sdl(self) -> str: ...
    def shutdown(self) -> None: ...

def prepare_request(
    query: str, variables: dict[str, Any] | None = None, operation_name: str | None = None
) -> dict[str, Any]: ...
def reset_log_cache() -> None: ...
def catalog() -> list[dict[str, Any]]: ...
def input_objects() -> dict[str, list[tuple[str, str]]]: ...
def build_operation(name: str, args: dict[str, Any], fields: str | None = None) -> dict[str, Any]: ...
def to_global_id(type_name: str, pk: str | int) -> str: ...
def from_global_id(id: str) -> tuple[str, str]: ...
