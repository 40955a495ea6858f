"""Profiles (secfindings.profiles, `secfindings profile ...`, -p/--profile): the precedence
table, the token sources (a test keyring backend, an environment variable, a command) and that
no secret is kept in the file or printed."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import keyring
import pytest
from click.testing import CliRunner
from keyring.backend import KeyringBackend
from keyring.backends.fail import Keyring as NoBackend

from secfindings.cli import main
from secfindings.profiles import Profile, ProfileError, ProfilesFile, load, resolve
from secfindings.testing import Emulator

CREDS = ("SECFINDINGS_API_TOKEN", "SECFINDINGS_BASE_URL", "SECFINDINGS_REGION", "SECFINDINGS_AUTH_URL")


class MemoryKeyring(KeyringBackend):
    """A keyring backend that keeps its passwords in a dict (the OS keyring is never touched)."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.kept: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.kept.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.kept[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if (service, username) not in self.kept:
            raise keyring.errors.PasswordDeleteError("not found")
        del self.kept[(service, username)]


@pytest.fixture
def ring() -> MemoryKeyring:
    before = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(before)


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cfg" / "profiles.toml"
    monkeypatch.setenv("SECFINDINGS_CONFIG", str(path))
    for name in (*CREDS, "SECFINDINGS_PROFILE", "SECFINDINGS_OUTPUT"):
        monkeypatch.delenv(name, raising=False)
    return path


@pytest.fixture(scope="module")
def emus() -> tuple[Emulator, Emulator]:
    with Emulator(findings=12, seed=3) as a, Emulator(findings=7, seed=4) as b:
        yield a, b


# -- the precedence table (docs/guides/profiles.md) -----------------------------------------------

FILE = ProfilesFile(
    Path("profiles.toml"),
    {
        "p1": Profile(
            "p1", base_url="https://p1/api/v1", region="eu-west-2", output="csv", token_env="P1_TOKEN"
        ),
        "p2": Profile("p2", base_url="https://p2/api/v1", auth_url="https://idp2/", token_env="P2_TOKEN"),
        "bare": Profile("bare"),
    },
    default="p2",
)
ENV_ALL = {
    "SECFINDINGS_BASE_URL": "https://env/api/v1",
    "SECFINDINGS_REGION": "us-east-2",
    "SECFINDINGS_API_TOKEN": "env-token",
    "SECFINDINGS_OUTPUT": "json",
    "P1_TOKEN": "p1-token",
    "P2_TOKEN": "p2-token",
}


@pytest.mark.parametrize(
    ("case", "flag", "env", "want"),
    [
        # flag -p: the profile's values win over the environment
        (
            "flag beats env",
            "p1",
            ENV_ALL,
            ("p1", "https://p1/api/v1", "eu-west-2", "csv", "p1-token", "flag"),
        ),
        # no flag: the environment beats the profile named by SECFINDINGS_PROFILE
        (
            "env beats env-named profile",
            None,
            {**ENV_ALL, "SECFINDINGS_PROFILE": "p1"},
            ("p1", "https://env/api/v1", "us-east-2", "json", "env-token", "environment"),
        ),
        # no flag, no environment: the profile the file's default names
        (
            "file default",
            None,
            {"P2_TOKEN": "p2-token"},
            ("p2", "https://p2/api/v1", "eu-central-1", None, "p2-token", "profile"),
        ),
        # SECFINDINGS_PROFILE beats the file's default
        (
            "env profile beats default",
            None,
            {"SECFINDINGS_PROFILE": "p1", "P1_TOKEN": "p1-token"},
            ("p1", "https://p1/api/v1", "eu-west-2", "csv", "p1-token", "profile"),
        ),
        # a flag profile without values falls through to the environment, then the defaults
        (
            "flag profile falls through",
            "bare",
            {"SECFINDINGS_BASE_URL": "https://env/api/v1"},
            ("bare", "https://env/api/v1", "eu-central-1", None, None, "default"),
        ),
    ],
)
def test_precedence_table(case: str, flag: str | None, env: dict[str, str], want: tuple) -> None:
    s = resolve(flag, env=env, profiles=FILE)
    profile, base, region, output, token, token_source = want
    assert (s.profile, s.base_url, s.region, s.output, s.token(), s.sources["token"]) == (
        profile,
        base,
        region,
        output,
        token,
        token_source,
    ), case


@pytest.mark.parametrize(
    ("flag_output", "env", "want"),
    [
        ("csv", {"SECFINDINGS_OUTPUT": "json"}, ("csv", "flag")),
        (None, {"SECFINDINGS_OUTPUT": "json"}, ("json", "environment")),
    ],
)
def test_output_flag_beats_env(flag_output: str | None, env: dict[str, str], want: tuple) -> None:
    s = resolve(None, flag_output, env=env, profiles=FILE)
    assert (s.output, s.sources["output"]) == want


def test_identity_is_one_setting() -> None:
    """A profile's auth URL is never paired with the environment's region."""
    s = resolve("p2", env={"SECFINDINGS_REGION": "us-east-2"}, profiles=FILE)
    assert (s.region, s.auth_url, s.sources["auth_url"]) == ("eu-central-1", "https://idp2/", "flag")
    s = resolve(None, env={"SECFINDINGS_PROFILE": "p2", "SECFINDINGS_REGION": "us-east-2"}, profiles=FILE)
    assert (s.region, s.auth_url) == ("us-east-2", "https://cognito-idp.us-east-2.amazonaws.com/")


# -- the file -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '[profiles.a]\nbase_url = "https://x/api/v1"\ntoken = "c2VjcmV0"\n',
        '[profiles.a]\napi_token = "c2VjcmV0"\n',
        '[profiles.a]\nbase_url = "https://x/api/v1"\n'
        'auth_url = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig"\n',
    ],
)
def test_a_secret_in_the_file_is_refused(config: Path, text: str) -> None:
    config.parent.mkdir(parents=True)
    config.write_text(text)
    with pytest.raises(ProfileError) as info:
        load()
    assert "c2VjcmV0" not in str(info.value)
    assert "eyJ" not in str(info.value)
    result = CliRunner().invoke(main, ["profile", "list"])
    assert result.exit_code == 2
    assert "c2VjcmV0" not in result.output
    assert "Traceback" not in result.output


def test_unknown_key_and_bad_toml_are_one_line_errors(config: Path) -> None:
    config.parent.mkdir(parents=True)
    config.write_text('[profiles.a]\nbase_ur = "https://x/api/v1"\n')
    result = CliRunner().invoke(main, ["profile", "list"])
    assert result.exit_code == 2
    assert "did you mean 'base_url'" in result.output
    config.write_text("[profiles.a\n")
    result = CliRunner().invoke(main, ["profile", "list"])
    assert result.exit_code == 2
    assert "is not TOML" in result.output


def test_file_round_trip_with_odd_text(config: Path) -> None:
    doc = load()
    doc.profiles["odd"] = Profile(
        "odd", base_url='https://x/"q"\\\u0007\u007f/api/v1', token_command="echo 'a b'"
    )
    doc.default = "odd"
    doc.save()
    assert oct(config.stat().st_mode & 0o777) == "0o600"
    again = load()
    assert again.profiles["odd"] == doc.profiles["odd"]
    assert again.default == "odd"


# -- token sources and the CLI, against emulators ----------------------------------------------------


def _add(name: str, emu: Emulator, *source: str, input: str | None = None) -> None:
    result = CliRunner().invoke(
        main,
        [
            "profile",
            "add",
            name,
            "--base-url",
            emu.base_url,
            "--auth-url",
            emu.auth_url,
            "--token-from",
            *source,
        ],
        input=input,
    )
    assert result.exit_code == 0, result.output


def test_keyring_profile_end_to_end(
    config: Path, ring: MemoryKeyring, emus: tuple[Emulator, Emulator]
) -> None:
    a, _ = emus
    token = a.create_api_token()
    _add("ring", a, "keyring", input=token + "\n")
    assert ring.kept[("secfindings", "ring")] == token
    assert token not in config.read_text()
    runner = CliRunner()
    result = runner.invoke(main, ["findings", "-p", "ring", "--limit", "3", "--json", "id_int"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["id_int"] for line in result.output.splitlines()] == [1, 2, 3]
    for args in (["profile", "list"], ["profile", "show", "ring"], ["profile", "list", "--json"]):
        shown = runner.invoke(main, args)
        assert shown.exit_code == 0
        assert token not in shown.output
        assert "keyring" in shown.output
    removed = runner.invoke(main, ["profile", "remove", "ring"])
    assert removed.exit_code == 0
    assert ("secfindings", "ring") not in ring.kept
    gone = runner.invoke(main, ["findings", "-p", "ring"])
    assert gone.exit_code == 2
    assert "no profile 'ring'" in gone.output


def test_flag_profile_beats_env_credentials(
    config: Path, emus: tuple[Emulator, Emulator], monkeypatch: pytest.MonkeyPatch
) -> None:
    """-p NAME talks to the profile's emulator although the environment names the other one;
    without -p the environment wins over the file's default."""
    a, b = emus
    monkeypatch.setenv("TOKEN_A", a.create_api_token())
    _add("a", a, "env:TOKEN_A")  # the first profile is the default
    monkeypatch.setenv("SECFINDINGS_BASE_URL", b.base_url)
    monkeypatch.setenv("SECFINDINGS_AUTH_URL", b.auth_url)
    monkeypatch.setenv("SECFINDINGS_API_TOKEN", b.create_api_token())
    query = "{ findings_view(first: 1) { total_count } }"
    runner = CliRunner()
    on_a = runner.invoke(main, ["query", "-", "-p", "a", "--jq", ".findings_view.total_count"], input=query)
    on_b = runner.invoke(main, ["query", "-", "--jq", ".findings_view.total_count"], input=query)
    assert (on_a.output, on_b.output) == ("12\n", "7\n")
    group_level = runner.invoke(main, ["-p", "a", "query", "-"], input=query)
    assert json.loads(group_level.output)["findings_view"]["total_count"] == 12


def test_token_command(config: Path, emus: tuple[Emulator, Emulator], tmp_path: Path) -> None:
    a, _ = emus
    token = a.create_api_token()
    script = tmp_path / "print_token.py"
    script.write_text(f"print({token!r})\n")
    _add("cmd", a, f"command:{sys.executable} {script}")
    result = CliRunner().invoke(main, ["finding", "2", "-p", "cmd", "--json", "id_int"])
    assert result.exit_code == 0
    assert json.loads(result.output) == {"id_int": 2}
    # A failing command: exit 2, one line, nothing it printed repeated.
    script.write_text(f"import sys; print({token!r}); sys.exit(3)\n")
    result = CliRunner().invoke(main, ["finding", "2", "-p", "cmd"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: profile 'cmd': token_command exited with status 3"


def test_profile_add_refuses_bad_input(config: Path, emus: tuple[Emulator, Emulator]) -> None:
    a, _ = emus
    runner = CliRunner()
    bad = runner.invoke(main, ["profile", "add", "-x", "--base-url", a.base_url, "--token-from", "env:T"])
    assert bad.exit_code == 2
    bad = runner.invoke(main, ["profile", "add", "x", "--base-url", a.base_url, "--token-from", "s3cr3t"])
    assert bad.exit_code == 2
    assert "keyring, env:VARIABLE or command:COMMAND" in bad.output
    _add("x", a, "env:T")
    again = runner.invoke(main, ["profile", "add", "x", "--base-url", a.base_url, "--token-from", "env:T"])
    assert again.exit_code == 2
    assert "--force" in again.output
    assert os.path.exists(config)


def test_a_file_others_can_write_is_refused(config: Path) -> None:
    """Another user's token_command would run as you: the file must be writable by you alone."""
    config.parent.mkdir(parents=True)
    config.write_text('[profiles.a]\ntoken_command = "echo x"\n')
    config.chmod(0o666)
    result = CliRunner().invoke(main, ["profile", "list"])
    assert result.exit_code == 2
    assert "writable by others" in result.output
    config.chmod(0o644)
    assert CliRunner().invoke(main, ["profile", "list"]).exit_code == 0


def test_p_on_a_subgroups_command_and_before_it(
    config: Path, emus: tuple[Emulator, Emulator], monkeypatch: pytest.MonkeyPatch
) -> None:
    """-p reaches a command of a subgroup (rules export), given after it or before the group:
    the requests go to b's emulator, none to the default's (a)."""
    a, b = emus
    if "rules" not in main.commands:
        pytest.skip("no rules command")
    monkeypatch.setenv("TOKEN_A", a.create_api_token())
    monkeypatch.setenv("TOKEN_B", b.create_api_token())
    _add("a", a, "env:TOKEN_A")
    _add("b", b, "env:TOKEN_B")  # a is the default
    runner = CliRunner()
    for args in (["rules", "export", "-p", "b"], ["-p", "b", "rules", "export"]):
        before = (a.stats()["api_requests"], b.stats()["api_requests"])
        result = runner.invoke(main, args)
        assert result.exit_code == 0, result.output
        after = (a.stats()["api_requests"], b.stats()["api_requests"])
        assert after[0] == before[0], args
        assert after[1] > before[1], args


def test_a_machine_without_a_keyring_backend_gets_one_line_not_a_traceback(
    config: Path, emus: tuple[Emulator, Emulator]
) -> None:
    """A headless server has no keyring backend (keyring's `fail` one): add, use and remove of a
    keyring profile each stop with one line that says what to do, exit 2, no traceback."""
    a, _ = emus
    before = keyring.get_keyring()
    keyring.set_keyring(NoBackend())
    try:
        runner = CliRunner()
        token = a.create_api_token()
        base = ["--base-url", a.base_url, "--auth-url", a.auth_url]
        added = runner.invoke(
            main, ["profile", "add", "ring", *base, "--token-from", "keyring"], input=token + "\n"
        )
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(
            f'[profiles.ring]\nbase_url = "{a.base_url}"\nauth_url = "{a.auth_url}"\ntoken_keyring = true\n'
        )
        used = runner.invoke(main, ["findings", "-p", "ring", "--limit", "1"])
        removed = runner.invoke(main, ["profile", "remove", "ring"])
    finally:
        keyring.set_keyring(before)
    for result in (added, used, removed):
        assert result.exit_code == 2, result.output
        assert not isinstance(result.exception, keyring.errors.KeyringError), result.exception
        (line,) = result.output.strip().splitlines()
        assert "the OS keyring failed: No recommended backend was available;" in line
        assert "--token-from env:NAME or command:CMD" in line
        assert token not in line


@pytest.mark.parametrize("url", ["https://api.example.com", "api.example.com/api/v1", "https:///api/v1"])
def test_add_refuses_a_base_url_that_is_not_the_api_root(config: Path, url: str) -> None:
    """`profile add x --base-url https://api.example.com` was saved, and every command of the
    profile then failed ("base_url must end in /api/v1"); now add says so, exit 2, one line."""
    result = CliRunner().invoke(main, ["profile", "add", "x", "--base-url", url, "--token-from", "env:X"])
    assert result.exit_code == 2, result.output
    assert "is not the API's root: https://<your API host>/api/v1" in result.output
    assert not config.exists()
