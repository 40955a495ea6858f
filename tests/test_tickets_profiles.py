"""The ticket systems' credentials from a profile (issue 36): `tickets drift` reads Jira's and
GitHub's token from the selected profile (an environment variable, the keyring, a command),
against the fake Jira and GitHub of tests/servers/tickets.py; the precedence table of
docs/guides/profiles.md (flag > environment > profile, `-p` being a flag); no token printed or
logged; a token in clear in the file refused in one line, exit 2."""

from __future__ import annotations

import json
import logging
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keyring
import pytest
from click.testing import CliRunner, Result
from tests.servers.tickets import TicketServer
from tests.test_profiles import MemoryKeyring
from tests.test_tickets_drift import REPO, copy_with_tickets, expected, issues

from secfindings.cli import main
from secfindings.profiles import Profile, ProfilesFile
from secfindings.tickets._credentials import resolve_tickets

SECRET = "tk-7f3a9c-the-right-one"
WRONG = "tk-0000-a-wrong-one"
EMAIL = "me@acme.test"  # the fake Jira's account
CLEAR = (
    "SECFINDINGS_API_TOKEN", "SECFINDINGS_BASE_URL", "SECFINDINGS_REGION", "SECFINDINGS_AUTH_URL",
    "SECFINDINGS_PROFILE", "SECFINDINGS_OUTPUT", "JIRA_EMAIL", "JIRA_API_TOKEN", "GITHUB_TOKEN",
    "GH_TOKEN", "P_TOKEN",
)  # fmt: skip


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, TicketServer]]:
    with (
        TicketServer("jira", issues("jira"), secret=SECRET, repo=REPO) as j,
        TicketServer("github", issues("github"), secret=SECRET, repo=REPO) as g,
    ):
        yield {"jira": j, "github": g}
    assert not j.errors
    assert not g.errors


@pytest.fixture(scope="module")
def dests(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("dests")
    return {k: copy_with_tickets(k, root / f"{k}.duckdb") for k in ("jira", "github")}


@pytest.fixture(params=["jira", "github"])
def kind(request: pytest.FixtureRequest, servers: dict[str, TicketServer]) -> str:
    servers[request.param].reset(issues(request.param))
    return str(request.param)


@pytest.fixture
def ring() -> Iterator[MemoryKeyring]:
    before = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(before)


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "profiles.toml"
    monkeypatch.setenv("SECFINDINGS_CONFIG", str(path))
    for name in CLEAR:
        monkeypatch.delenv(name, raising=False)
    return path


def write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)


def system_keys(kind: str, server: TicketServer, source: str) -> str:
    """A profile's lines naming ``kind``'s system at ``server`` and its token's ``source``."""
    if kind == "jira":
        where = f'jira_url = "{server.url}"\njira_email = "{EMAIL}"\njira_project = "SEC"\n'
    else:
        where = f'github_repo = "{REPO}"\ngithub_api = "{server.url}"\n'
    return where + source


def drift(dest: str, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, ["tickets", "drift", dest, "--format", "json", *args], env=env)


def reported(got: Result, kind: str) -> dict[str, Any]:
    assert got.exit_code == 0, got.output
    out = json.loads(got.stdout)
    return {k: v for k, v in out.items() if k in expected(kind)}


# -- the token from the profile: environment variable, keyring, command ----------------------------


@pytest.mark.parametrize("how", ["env", "keyring", "command"])
def test_drift_reads_the_token_from_the_profile(
    kind: str,
    how: str,
    servers: dict[str, TicketServer],
    dests: dict[str, str],
    config: Path,
    ring: MemoryKeyring,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No --jira/--github and no token in the environment: the default profile names the system
    and where its token lives. Fails without profiles' ticket keys (unknown key, exit 2)."""
    if how == "env":
        source, env = f'{kind}_token_env = "P_TOKEN"\n', {"P_TOKEN": SECRET}
    elif how == "keyring":
        ring.set_password(f"secfindings-{kind}", "t", SECRET)
        source, env = f"{kind}_token_keyring = true\n", {}
    else:
        script = tmp_path / "token.py"
        script.write_text(f"print({SECRET!r})\n", encoding="utf-8")
        command = shlex.join([sys.executable, str(script)])
        source, env = f"{kind}_token_command = {json.dumps(command)}\n", {}
    write(config, f'default = "t"\n[profiles.t]\n{system_keys(kind, servers[kind], source)}')
    caplog.set_level(logging.DEBUG)
    got = drift(dests[kind], env=env)
    assert reported(got, kind) == expected(kind)
    assert servers[kind].requests  # the fake system was asked, with the profile's token
    assert SECRET not in got.stdout + got.stderr + caplog.text
    # the flag alone takes the profile's URL or repository
    got = drift(dests[kind], "--jira" if kind == "jira" else "--github", env=env)
    assert reported(got, kind) == expected(kind)
    assert SECRET not in got.stdout + got.stderr


def test_a_wrong_profile_token_fails_authentication_unprinted(
    kind: str, servers: dict[str, TicketServer], dests: dict[str, str], config: Path, ring: MemoryKeyring
) -> None:
    ring.set_password(f"secfindings-{kind}", "t", WRONG)
    keys = system_keys(kind, servers[kind], f"{kind}_token_keyring = true\n")
    write(config, f'default = "t"\n[profiles.t]\n{keys}')
    got = drift(dests[kind])
    assert got.exit_code == 3, got.output
    assert WRONG not in got.output
    assert "Traceback" not in got.output
    ring.kept.clear()  # the keyring has none: one line naming the keyring entry, exit 2
    got = drift(dests[kind])
    assert got.exit_code == 2, got.output
    assert got.output.count("\n") == 1
    assert f"secfindings-{kind}/t" in got.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--jira", "https://a.atlassian.test", "--github", REPO], "not both"),
        (["--jira"], "--jira needs the site's URL"),
        (["--github"], "--github needs the repository"),
        ([], "give one of --jira URL or --github OWNER/REPO"),
    ],
)
def test_bad_usage_is_one_line(args: list[str], says: str, config: Path, dests: dict[str, str]) -> None:
    write(config, '[profiles.t]\nbase_url = "https://api.example.test/api/v1"\n')
    got = drift(dests["jira"], "-p", "t", *args, env={"SECFINDINGS_OUTPUT": "nonsense"})
    assert got.exit_code == 2, got.output
    assert got.output.count("\n") == 1, got.output
    assert says in got.output


def test_a_profile_naming_both_systems_needs_a_flag(
    config: Path, servers: dict[str, TicketServer], dests: dict[str, str]
) -> None:
    s = servers["jira"]
    s.reset(issues("jira"))
    keys = system_keys("jira", s, 'jira_token_env = "P_TOKEN"\ngithub_repo = "acme/app"\n')
    write(config, f'default = "t"\n[profiles.t]\n{keys}')
    got = drift(dests["jira"], env={"P_TOKEN": SECRET})
    assert got.exit_code == 2, got.output
    assert "names Jira and GitHub: give --jira or --github" in got.output
    assert reported(drift(dests["jira"], "--jira", env={"P_TOKEN": SECRET}), "jira") == expected("jira")


# -- precedence: flag > environment > profile -------------------------------------------------------

FILE = ProfilesFile(
    Path("profiles.toml"),
    {
        "p": Profile(
            "p",
            jira_url="https://p.atlassian.test",
            jira_email="p@acme.test",
            jira_project="PP",
            jira_token_env="P_JIRA",
            github_repo="p/app",
            github_api="https://ghe.p.test/api/v3",
            github_token_env="P_GH",
        ),
        "bare": Profile("bare", jira_url="https://bare.atlassian.test", github_repo="bare/app"),
    },
    default="p",
)
ENV = {"P_JIRA": "p-jira", "P_GH": "p-gh"}


@pytest.mark.parametrize(
    ("case", "flags", "env", "want"),
    [
        # the profile the file's default names, nothing else
        ("profile", {}, ENV,
         ("https://p.atlassian.test", "p@acme.test", "p-jira", "p/app", "https://ghe.p.test/api/v3", "p-gh",
          "profile")),
        # the environment beats the profile named by the default (or SECFINDINGS_PROFILE)
        ("env beats profile", {},
         {**ENV, "JIRA_EMAIL": "env@acme.test", "JIRA_API_TOKEN": "env-jira", "GITHUB_TOKEN": "env-gh"},
         ("https://p.atlassian.test", "env@acme.test", "env-jira", "p/app", "https://ghe.p.test/api/v3",
          "env-gh", "environment")),
        ("env beats env-named profile", {},
         {**ENV, "SECFINDINGS_PROFILE": "p", "JIRA_API_TOKEN": "env-jira", "GH_TOKEN": "env-gh2"},
         ("https://p.atlassian.test", "p@acme.test", "env-jira", "p/app", "https://ghe.p.test/api/v3",
          "env-gh2", "environment")),
        # -p: the profile is the flag's layer and beats the environment
        ("-p beats env", {"flag_profile": "p"},
         {**ENV, "SECFINDINGS_PROFILE": "bare", "JIRA_EMAIL": "env@acme.test", "JIRA_API_TOKEN": "env-jira",
          "GITHUB_TOKEN": "env-gh"},
         ("https://p.atlassian.test", "p@acme.test", "p-jira", "p/app", "https://ghe.p.test/api/v3", "p-gh",
          "flag")),
        # a profile without a token source: the environment's, with the environment's e-mail
        ("bare profile", {"flag_profile": "bare"},
         {"JIRA_EMAIL": "env@acme.test", "JIRA_API_TOKEN": "env-jira", "GITHUB_TOKEN": "env-gh"},
         ("https://bare.atlassian.test", "env@acme.test", "env-jira", "bare/app", "https://api.github.com",
          "env-gh", "environment")),
        # the explicit flags beat every profile's URL and repository
        ("flags", {"flag_profile": "p", "jira": "https://flag.atlassian.test", "github": "flag/app",
                   "github_api": "https://ghe.flag.test/api/v3"}, ENV,
         ("https://flag.atlassian.test", "p@acme.test", "p-jira", "flag/app", "https://ghe.flag.test/api/v3",
          "p-gh", "flag")),
    ],
)  # fmt: skip
def test_the_precedence_table(
    case: str, flags: dict[str, str], env: dict[str, str], want: tuple[str, ...]
) -> None:
    url, email, jira_token, repo, api, gh_token, token_from = want
    flag_profile = flags.get("flag_profile")
    j = resolve_tickets(jira=flags.get("jira", ""), flag_profile=flag_profile, env=env, profiles=FILE)
    g = resolve_tickets(
        github=flags.get("github", ""),
        github_api=flags.get("github_api"),
        flag_profile=flag_profile,
        env=env,
        profiles=FILE,
    )
    assert (j.url, j.email, j.token()) == (url, email, jira_token), case
    assert (g.repo, g.url, g.token()) == (repo, api, gh_token), case
    assert j.sources["token"] == g.sources["token"] == token_from, case
    assert jira_token not in repr(j)
    assert gh_token not in repr(g)


def test_jira_email_and_token_come_from_one_layer() -> None:
    """-p names an e-mail but no token: the environment's token goes with the environment's
    e-mail, not with the profile's."""
    only_email = ProfilesFile(
        Path("x"), {"e": Profile("e", jira_url="https://e.atlassian.test", jira_email="p@acme.test")}
    )
    env = {"JIRA_EMAIL": "env@acme.test", "JIRA_API_TOKEN": "env-jira"}
    got = resolve_tickets(jira="", flag_profile="e", env=env, profiles=only_email)
    assert (got.email, got.token(), got.sources["jira_email"]) == ("env@acme.test", "env-jira", "environment")
    got = resolve_tickets(jira="", flag_profile="e", env={"JIRA_API_TOKEN": "env-jira"}, profiles=only_email)
    assert got.email == "p@acme.test"  # the environment names none: the profile's


def test_the_table_over_http(
    servers: dict[str, TicketServer], dests: dict[str, str], config: Path, ring: MemoryKeyring
) -> None:
    """The right token sits in one layer, a wrong one in the layer below or above: the run
    succeeds only when the layer the table names is used."""
    s = servers["github"]
    s.reset(issues("github"))
    ring.set_password("secfindings-github", "right", SECRET)
    ring.set_password("secfindings-github", "wrong", WRONG)
    keys = system_keys("github", s, "github_token_keyring = true\n")
    write(config, f'default = "wrong"\n[profiles.right]\n{keys}[profiles.wrong]\n{keys}')
    dest = dests["github"]
    # the environment beats the default profile
    assert reported(drift(dest, env={"GITHUB_TOKEN": SECRET}), "github") == expected("github")
    assert drift(dest).exit_code == 3  # the default profile's (wrong) token alone
    # -p beats the environment
    got = CliRunner().invoke(
        main, ["tickets", "drift", dest, "-p", "right", "--format", "json"], env={"GITHUB_TOKEN": WRONG}
    )
    assert reported(got, "github") == expected("github")
    # SECFINDINGS_PROFILE sits below the environment
    assert drift(dest, env={"SECFINDINGS_PROFILE": "right", "GITHUB_TOKEN": WRONG}).exit_code == 3
    # --github-api beats the profile's API (a closed port here: it must not be asked)
    gone = drift(dest, "-p", "right", "--github-api", "http://127.0.0.1:9/api/v3")
    assert gone.exit_code == 1, gone.output
    assert "127.0.0.1:9" in gone.output
    assert SECRET not in gone.output


# -- no token printed: profile add / show / remove ------------------------------------------------


def test_profile_add_show_remove_keep_the_tokens_out_of_sight(
    config: Path, ring: MemoryKeyring, servers: dict[str, TicketServer], dests: dict[str, str]
) -> None:
    s = servers["jira"]
    s.reset(issues("jira"))
    args = [
        "profile", "add", "t", "--base-url", "https://api.example.test/api/v1", "--token-from", "keyring",
        "--jira-url", s.url, "--jira-email", EMAIL, "--jira-project", "SEC", "--jira-token-from", "keyring",
        "--github-repo", REPO, "--github-token-from", "env:P_TOKEN",
    ]  # fmt: skip
    got = CliRunner().invoke(main, args, input=f"api-token-1\n{SECRET}\n")
    assert got.exit_code == 0, got.output
    assert ring.kept == {("secfindings", "t"): "api-token-1", ("secfindings-jira", "t"): SECRET}
    text = config.read_text(encoding="utf-8")
    assert SECRET not in text
    assert "jira_token_keyring = true" in text
    assert 'github_token_env = "P_TOKEN"' in text
    shown = CliRunner().invoke(main, ["profile", "show", "t"], env={"P_TOKEN": "p-gh-token"})
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert "jira_token   keyring (secfindings-jira/t)  (flag)" in lines
    assert "github_token environment $P_TOKEN  (flag)" in lines
    assert f"jira         {s.url}  (flag)" in lines
    shown_json = CliRunner().invoke(main, ["profile", "show", "--json"], env={"GITHUB_TOKEN": "env-gh-token"})
    got_json = json.loads(shown_json.stdout)
    assert got_json["settings"]["github_token"] == "environment $GITHUB_TOKEN"
    assert got_json["sources"]["github_token"] == "environment"
    assert got_json["sources"]["jira_token"] == "profile"
    for out in (shown.output, shown_json.output):
        for token in (SECRET, "api-token-1", "p-gh-token", "env-gh-token"):
            assert token not in out
    # the profile works as added
    assert reported(drift(dests["jira"], "--jira"), "jira") == expected("jira")
    got = CliRunner().invoke(main, ["profile", "remove", "t"])
    assert got.exit_code == 0, got.output
    assert ring.kept == {}


# -- a token in clear in the file is refused -------------------------------------------------------

GH_PAT = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
ATLASSIAN = "ATATT3xFfGF0T4nq-8dK2_Qm1vZ=9A1B2C3D"
OLD_ATLASSIAN = "Xy12abCD34efGH56ijKL78mn"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtZSJ9.c2lnbmF0dXJl"


@pytest.mark.parametrize(
    ("line", "literal", "says"),
    [
        (f'jira_token = "{ATLASSIAN}"', ATLASSIAN, "secret in clear ('jira_token')"),
        (f'github_token = "{GH_PAT}"', GH_PAT, "secret in clear ('github_token')"),
        (f'jira_api_token = "{OLD_ATLASSIAN}"', OLD_ATLASSIAN, "secret in clear ('jira_api_token')"),
        (f'github_token_env = "{GH_PAT}"', GH_PAT, "github_token_env holds what looks like a token"),
        (
            f'jira_token_env = "{OLD_ATLASSIAN}"',
            OLD_ATLASSIAN,
            "jira_token_env holds what looks like a token",
        ),
        (
            f'jira_token_command = "{ATLASSIAN}"',
            ATLASSIAN,
            "jira_token_command holds what looks like a token",
        ),
        (f'github_token_command = "{JWT}"', JWT, "holds a JWT"),
        (f'jira_token_keyring = "{GH_PAT}"', GH_PAT, "jira_token_keyring must be a bool"),
    ],
)
def test_a_literal_token_in_the_file_is_refused_in_one_line(
    line: str, literal: str, says: str, config: Path, dests: dict[str, str]
) -> None:
    write(config, f'default = "t"\n[profiles.t]\njira_url = "https://acme.atlassian.test"\n{line}\n')
    got = drift(dests["jira"], "--jira", env={"JIRA_EMAIL": EMAIL, "JIRA_API_TOKEN": SECRET})
    assert got.exit_code == 2, got.output
    assert got.output.count("\n") == 1, got.output
    assert says in got.output
    assert literal not in got.output
    assert "Traceback" not in got.output


def test_profile_add_refuses_a_token_given_as_its_source(config: Path) -> None:
    base = ["profile", "add", "t", "--base-url", "https://api.example.test/api/v1", "--token-from", "env:T"]
    for extra in (["--github-token-from", f"env:{GH_PAT}"], ["--jira-token-from", ATLASSIAN]):
        got = CliRunner().invoke(main, [*base, *extra])
        assert got.exit_code == 2, got.output
        assert GH_PAT not in got.output
        assert ATLASSIAN not in got.output
        assert "Traceback" not in got.output
    assert not config.exists()


def test_a_key_of_the_right_shape_is_kept(config: Path) -> None:
    """Variables' names and commands are not taken for tokens."""
    p = Profile(
        "ok",
        jira_token_env="JIRA_API_TOKEN_ACME_PROD_2",
        github_token_command="pass show secfindings/github",
    )
    assert p.github_token_command == "pass show secfindings/github"
    assert p.jira_token_env == "JIRA_API_TOKEN_ACME_PROD_2"
