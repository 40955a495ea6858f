"""Profiles: named tenants in a TOML file, and the settings a command runs with.

The file is ``$SECFINDINGS_CONFIG`` or ``~/.config/secfindings/profiles.toml``
(``$XDG_CONFIG_HOME/secfindings/profiles.toml`` where that is set)::

    default = "prod"

    [profiles.prod]
    base_url = "https://api.example.com/api/v1"
    region = "eu-central-1"
    output = "table"
    token_keyring = true              # the OS keyring: service "secfindings", user "prod"

    [profiles.sandbox]
    base_url = "https://sandbox.example.com/api/v1"
    auth_url = "https://idp.example.com/"
    token_env = "SANDBOX_TOKEN"       # an environment variable holds it

    [profiles.customer-a]
    base_url = "https://eu.example.com/api/v1"
    token_command = "pass show secfindings/customer-a"   # a command prints it

A profile may name the ticket systems too (``jira_url``, ``jira_email``, ``jira_project``,
``github_repo``, ``github_api``) and where their tokens live, as for the API's token
(``jira_token_keyring``/``_env``/``_command``, ``github_token_...``; :mod:`secfindings._ticket_keys`).

A profile says where its token lives, never the token: a file with a ``token``, ``api_token``,
``jwt``, ``password`` or ``secret`` key is refused (:class:`ProfileError`), and so is a value
that looks like a JWT anywhere in it.

Precedence of every setting (docs/guides/profiles.md has the table): a flag (``-p NAME``: that
profile's values; ``--json``/``--csv``/``--jq`` for the output) > the environment
(``SECFINDINGS_BASE_URL``, ``SECFINDINGS_API_TOKEN``, ``SECFINDINGS_REGION`` /
``SECFINDINGS_AUTH_URL``, ``SECFINDINGS_OUTPUT``) > the profile that ``SECFINDINGS_PROFILE`` or
the file's ``default`` names > the defaults.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from secfindings._shared import did_you_mean
from secfindings._ticket_keys import BOOL_KEYS, is_secret_key
from secfindings._ticket_keys import problem as ticket_problem
from secfindings.errors import ConfigurationError

__all__ = ["Profile", "ProfileError", "ProfilesFile", "Settings", "config_path", "load", "resolve"]

CONFIG_ENV = "SECFINDINGS_CONFIG"
PROFILE_ENV = "SECFINDINGS_PROFILE"
OUTPUT_ENV = "SECFINDINGS_OUTPUT"
#: The keyring's service name; the user name is the profile's.
KEYRING_SERVICE = "secfindings"
OUTPUTS = ("table", "json", "jsonl", "csv")
REGIONS = ("eu-central-1", "eu-west-2", "us-east-2")
DEFAULT_REGION = "eu-central-1"
#: How long a token_command may take.
COMMAND_TIMEOUT = 30.0
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_SECRET_KEYS = frozenset({"token", "api_token", "jwt", "password", "secret", "access_token", "key"})
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.")

#: The profile named by ``-p/--profile`` for this command (set by the CLI's option).
FLAG_PROFILE: contextvars.ContextVar[str | None] = contextvars.ContextVar("secfindings_profile", default=None)
#: The output named by a flag of this command (--json/--csv/--jq set it).
FLAG_OUTPUT: contextvars.ContextVar[str | None] = contextvars.ContextVar("secfindings_output", default=None)


class ProfileError(ConfigurationError):
    """The profiles file or a profile is wrong (exit 2 on the command line)."""


@dataclass(frozen=True)
class Profile:
    """One tenant: where its API is, its identity provider, its output and its token source;
    optionally its ticket systems and their token sources (:mod:`secfindings._ticket_keys`)."""

    name: str
    base_url: str | None = None
    region: str | None = None
    auth_url: str | None = None
    output: str | None = None
    token_keyring: bool = False
    token_env: str | None = None
    token_command: str | None = None
    jira_url: str | None = None
    jira_email: str | None = None
    jira_project: str | None = None
    jira_token_keyring: bool = False
    jira_token_env: str | None = None
    jira_token_command: str | None = None
    github_repo: str | None = None
    github_api: str | None = None
    github_token_keyring: bool = False
    github_token_env: str | None = None
    github_token_command: str | None = None

    def __post_init__(self) -> None:
        check_name(self.name)
        if self.region is not None and self.region not in REGIONS:
            raise ProfileError(
                f"profile {self.name!r}: region {self.region!r} is none of {', '.join(REGIONS)}"
                f"{did_you_mean(self.region, REGIONS)}"
            )
        if self.output is not None and self.output not in OUTPUTS:
            raise ProfileError(
                f"profile {self.name!r}: output {self.output!r} is none of {', '.join(OUTPUTS)}"
            )
        sources = sum((self.token_keyring, self.token_env is not None, self.token_command is not None))
        if sources > 1:
            raise ProfileError(
                f"profile {self.name!r}: give one of token_keyring, token_env and token_command, "
                f"not {sources}"
            )
        if self.token_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.token_env):
            raise ProfileError(f"profile {self.name!r}: token_env must name an environment variable")
        if self.token_command is not None:
            try:
                words = shlex.split(self.token_command)
            except ValueError as exc:
                raise ProfileError(f"profile {self.name!r}: token_command does not parse: {exc}") from None
            if not words:
                raise ProfileError(f"profile {self.name!r}: token_command is empty")
        wrong = ticket_problem(vars(self))
        if wrong is not None:
            raise ProfileError(f"profile {self.name!r}: {wrong}")

    @property
    def token_source(self) -> str:
        """Where the token is read from, in words (never the token; a command by its program)."""
        if self.token_keyring:
            return f"keyring ({KEYRING_SERVICE}/{self.name})"
        if self.token_env is not None:
            return f"environment ${self.token_env}"
        if self.token_command is not None:
            return f"command {shlex.split(self.token_command)[0]} ..."
        return "none (SECFINDINGS_API_TOKEN or a prompt)"

    def has_token_source(self) -> bool:
        """Whether the profile says where its token lives (keyring, variable or command)."""
        return self.token_keyring or self.token_env is not None or self.token_command is not None

    def read_token(self, env: Mapping[str, str] | None = None) -> str:
        """The API token from the profile's source (ProfileError when there is none); ``env``:
        where ``token_env`` is looked up (default ``os.environ``)."""
        if self.token_keyring:
            with keyring_errors():
                token = keyring_module().get_password(KEYRING_SERVICE, self.name)
            if not isinstance(token, str) or not token:
                raise ProfileError(
                    f"profile {self.name!r}: the keyring has no token for {KEYRING_SERVICE}/{self.name} "
                    f"(store one with: secfindings profile add {self.name} --token-from keyring --force)"
                )
            return token
        if self.token_env is not None:
            token = (os.environ if env is None else env).get(self.token_env, "").strip()
            if not token:
                raise ProfileError(f"profile {self.name!r}: ${self.token_env} is not set")
            return token
        if self.token_command is not None:
            return run_token_command(self.name, self.token_command)
        raise ProfileError(f"profile {self.name!r} names no token source")

    def to_table(self) -> dict[str, Any]:
        """The profile's keys as written in the file (unset ones left out)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "name" and value not in (None, False):
                out[f.name] = value
        return out


def run_token_command(name: str, command: str, key: str = "token_command") -> str:
    try:
        done = subprocess.run(
            shlex.split(command),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        raise ProfileError(f"profile {name!r}: {key}'s program is not found") from None
    except subprocess.TimeoutExpired:
        raise ProfileError(f"profile {name!r}: {key} took longer than {COMMAND_TIMEOUT:g} s") from None
    except OSError as exc:
        raise ProfileError(f"profile {name!r}: {key} cannot run: {exc.strerror}") from None
    # Nothing it printed is repeated: its output is the token, its errors may hold it too.
    if done.returncode != 0:
        raise ProfileError(f"profile {name!r}: {key} exited with status {done.returncode}")
    token = done.stdout.strip()
    if not token:
        raise ProfileError(f"profile {name!r}: {key} printed nothing")
    return token


def keyring_module() -> Any:
    """The ``keyring`` package, or an error naming the extra that brings it."""
    try:
        import keyring  # noqa: PLC0415 - optional: the profiles extra
    except ImportError:
        raise ProfileError(
            "the OS keyring needs the keyring package: pip install 'secfindings[profiles]'"
        ) from None
    return keyring


@contextlib.contextmanager
def keyring_errors() -> Iterator[None]:
    """A keyring that fails (no backend on the machine, as on a server without a desktop
    session, or a locked one) as one :class:`ProfileError` line with a way forward, not the
    backend's traceback. A :class:`keyring.errors.PasswordDeleteError` passes through."""
    errors = keyring_module().errors
    try:
        yield
    except errors.PasswordDeleteError:
        raise
    except errors.KeyringError as exc:
        first = str(exc).split(". ")[0].strip().rstrip(".") or type(exc).__name__
        raise ProfileError(
            f"the OS keyring failed: {first}; install a keyring backend (such as keyrings.alt), "
            "or keep the token in an environment variable or a command: "
            "--token-from env:NAME or command:CMD"
        ) from None


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ProfileError(
            f"{name!r} is not a profile name: letters, digits, '-' and '_', starting with a letter "
            "or digit, at most 64"
        )
    return name


@dataclass
class ProfilesFile:
    """The profiles file's content: the profiles by name and the default's name."""

    path: Path
    profiles: dict[str, Profile] = field(default_factory=dict)
    default: str | None = None

    def get(self, name: str) -> Profile:
        """The profile ``name`` (a ProfileError naming the known ones, with a did-you-mean)."""
        try:
            return self.profiles[name]
        except KeyError:
            known = sorted(self.profiles)
            raise ProfileError(
                f"no profile {name!r} in {self.path}{did_you_mean(name, known)}"
                + (f" (profiles: {', '.join(known)})" if known else " (it has none: secfindings profile add)")
            ) from None

    def save(self) -> None:
        """Write the file (mode 0600, its folder 0700 when made here), atomically."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        lines = ["# secfindings profiles (secfindings profile add/remove); no token is kept here.\n"]
        if self.default is not None:
            lines.append(f"default = {_toml_string(self.default)}\n")
        for name in sorted(self.profiles):
            lines.append(f"\n[profiles.{_toml_string(name)}]\n")
            for key, value in self.profiles[name].to_table().items():
                text = "true" if value is True else _toml_string(str(value))
                lines.append(f"{key} = {text}\n")
        # a name no one can guess, made afresh (mkstemp: O_EXCL, 0600): the fixed .NAME.PID.tmp
        # followed a link planted beside the file and wrote the profiles through it
        fd, name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        tmp = Path(name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write("".join(lines))
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def _toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and the control characters escaped."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """Where the profiles file is: ``$SECFINDINGS_CONFIG``, else the user's config folder."""
    env = os.environ if env is None else env
    given = env.get(CONFIG_ENV, "").strip()
    if given:
        return Path(given).expanduser()
    base = env.get("XDG_CONFIG_HOME", "").strip()
    root = Path(base) if base else Path.home() / ".config"
    return root / "secfindings" / "profiles.toml"


_KEYS = {f.name for f in fields(Profile)} - {"name"}


def load(path: Path | None = None) -> ProfilesFile:
    """The profiles file (an empty one when there is no file)."""
    path = config_path() if path is None else path
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return ProfilesFile(path)
    except OSError as exc:
        raise ProfileError(f"cannot read {path}: {exc.strerror}") from None
    _check_owner(path)
    tomllib = _toml_reader()
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(f"{path} is not TOML: {exc}") from None
    if _JWT.search(raw.decode("utf-8", "replace")):
        raise ProfileError(f"{path} holds a JWT: remove it (a profile names where its token lives)")
    unknown = set(doc) - {"default", "profiles"}
    if unknown:
        raise ProfileError(f"{path}: unknown top-level key {sorted(unknown)[0]!r} (known: default, profiles)")
    tables = doc.get("profiles", {})
    if not isinstance(tables, dict):
        raise ProfileError(f"{path}: 'profiles' must be a table of tables")
    profiles: dict[str, Profile] = {}
    for name, table in tables.items():
        profiles[name] = _profile(path, name, table)
    default = doc.get("default")
    if default is not None and (not isinstance(default, str) or default not in profiles):
        raise ProfileError(f"{path}: default {default!r} names no profile of the file")
    return ProfilesFile(path, profiles, default)


def _check_owner(path: Path) -> None:
    """A file another user can change could make ``token_command`` run their command as you,
    or send your token to their URL: it must be yours and writable by you alone (POSIX)."""
    if os.name != "posix":
        return
    st = path.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise ProfileError(
            f"{path} is writable by others or not yours: its token_command would run what they "
            f"write (chmod go-w {path})"
        )


def _toml_reader() -> Any:
    """tomllib (3.11 on), else tomli; read only when there is a file, so that a command without
    one never needs it."""
    if sys.version_info >= (3, 11):
        import tomllib  # noqa: PLC0415 - only when a profiles file exists

        return tomllib
    try:  # pragma: no cover - Python 3.10
        import tomli  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415
    except ImportError:  # pragma: no cover
        raise ProfileError(
            "reading the profiles file on Python 3.10 needs tomli: pip install tomli"
        ) from None
    return tomli  # pragma: no cover


def _profile(path: Path, name: str, table: Any) -> Profile:
    if not isinstance(table, dict):
        raise ProfileError(f"{path}: profiles.{name} must be a table")
    secret = sorted(k for k in table if k in _SECRET_KEYS or (k not in _KEYS and is_secret_key(k)))
    if secret:
        raise ProfileError(
            f"{path}: profile {name!r} holds a secret in clear ({secret[0]!r}): remove it, and say "
            "where the token lives instead (token_keyring = true, token_env or token_command)"
        )
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ProfileError(
            f"{path}: profile {name!r} has an unknown key {unknown[0]!r}"
            f"{did_you_mean(unknown[0], sorted(_KEYS))}"
        )
    for key, value in table.items():
        want = bool if key in BOOL_KEYS else str
        if not isinstance(value, want):
            raise ProfileError(f"{path}: profile {name!r}: {key} must be a {want.__name__}")
    return Profile(name=name, **table)


#: Where a setting came from, for ``profile show`` and the tests.
FLAG, ENV, PROFILE, DEFAULT = "flag", "environment", "profile", "default"


@dataclass(frozen=True)
class Settings:
    """The settings a command runs with, and where each came from (``sources``)."""

    profile: str | None
    base_url: str | None
    region: str | None
    auth_url: str | None
    output: str | None
    token_from: Profile | None  # the profile whose token source gives the token, or None
    env_token: str | None = field(repr=False)  # the environment's token, when that layer gives it
    sources: dict[str, str]
    env: Mapping[str, str] = field(default_factory=dict, repr=False)

    def token(self) -> str | None:
        """The API token (read from its source now), or None when nothing gives one."""
        if self.token_from is not None:
            return self.token_from.read_token(self.env)
        return self.env_token

    def client_kwargs(self) -> dict[str, Any]:
        """``base_url``, ``region`` and ``auth_url`` for :class:`secfindings.Client`, given
        explicitly so that the client reads nothing more from the environment."""
        return {"base_url": self.base_url, "region": self.region, "auth_url": self.auth_url}


def resolve(
    flag_profile: str | None = None,
    flag_output: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    profiles: ProfilesFile | None = None,
) -> Settings:
    """The settings by precedence: flag > environment > profile > defaults (module docstring)."""
    env = os.environ if env is None else env
    sources: dict[str, str] = {}
    name: str | None
    if flag_profile is not None:
        name, sources["profile"] = flag_profile, FLAG
    elif env.get(PROFILE_ENV, "").strip():
        name, sources["profile"] = env[PROFILE_ENV].strip(), ENV
    else:
        name = None
    profiles = load(config_path(env)) if profiles is None else profiles
    if name is None and profiles.default is not None:
        name, sources["profile"] = profiles.default, PROFILE
    chosen = profiles.get(check_name(name)) if name is not None else None
    on_top = chosen if flag_profile is not None else None  # -p: the profile is the flag's layer
    below = chosen if flag_profile is None else None

    def pick(key: str, env_name: str | None, default: str | None = None) -> str | None:
        if on_top is not None and getattr(on_top, key) is not None:
            sources[key] = FLAG
            return str(getattr(on_top, key))
        if env_name is not None and env.get(env_name, "").strip():
            sources[key] = ENV
            return env[env_name].strip()
        if below is not None and getattr(below, key) is not None:
            sources[key] = PROFILE
            return str(getattr(below, key))
        sources[key] = DEFAULT
        return default

    base_url = pick("base_url", "SECFINDINGS_BASE_URL")
    # The identity provider is one setting: the first layer that names a region or an auth URL
    # gives both (a profile's region is never paired with another layer's auth URL).
    region, auth_url = _identity(on_top, below, env, sources)
    if flag_output is not None:
        output: str | None = flag_output
        sources["output"] = FLAG
    else:
        output = pick("output", OUTPUT_ENV)
        if output is not None and output not in OUTPUTS:
            raise ProfileError(f"${OUTPUT_ENV}: {output!r} is none of {', '.join(OUTPUTS)}")
    token_from: Profile | None = None
    env_token: str | None = None
    if on_top is not None and on_top.has_token_source():
        token_from, sources["token"] = on_top, FLAG
    elif env.get("SECFINDINGS_API_TOKEN", "").strip():
        env_token, sources["token"] = env["SECFINDINGS_API_TOKEN"].strip(), ENV
    elif below is not None and below.has_token_source():
        token_from, sources["token"] = below, PROFILE
    else:
        sources["token"] = DEFAULT
    return Settings(name, base_url, region, auth_url, output, token_from, env_token, sources, env)


def _identity(
    on_top: Profile | None, below: Profile | None, env: Mapping[str, str], sources: dict[str, str]
) -> tuple[str | None, str | None]:
    layers: list[tuple[str, str | None, str | None]] = []
    if on_top is not None:
        layers.append((FLAG, on_top.region, on_top.auth_url))
    layers.append(
        (
            ENV,
            env.get("SECFINDINGS_REGION", "").strip() or None,
            env.get("SECFINDINGS_AUTH_URL", "").strip() or None,
        )
    )
    if below is not None:
        layers.append((PROFILE, below.region, below.auth_url))
    for where, region, auth_url in layers:
        if region is not None or auth_url is not None:
            sources["region"] = sources["auth_url"] = where
            region = region or DEFAULT_REGION
            return region, auth_url or f"https://cognito-idp.{region}.amazonaws.com/"
    sources["region"] = sources["auth_url"] = DEFAULT
    return DEFAULT_REGION, f"https://cognito-idp.{DEFAULT_REGION}.amazonaws.com/"


def with_profile(profile: Profile, **changes: Any) -> Profile:
    """``profile`` with ``changes`` (checked again)."""
    return replace(profile, **changes)
