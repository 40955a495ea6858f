"""``secfindings tickets drift SOURCE``: do the tickets in Jira or GitHub tell the truth about
the findings (secfindings.tickets)."""

from __future__ import annotations

import click

from secfindings._cli_support import client_from_env, emit, errors


@click.group("tickets")
def tickets_group() -> None:
    """Compare the findings' tickets with the ticket system."""


@tickets_group.command("pull")
@click.argument("dest")
def pull_command(dest: str) -> None:
    """Keep the findings' tickets, as the service lists them, in the finding_tickets table of
    DEST (a synced destination; what it held is replaced), for a later 'tickets drift DEST'.
    One walk of the findings with their tickets (those the copy's sync filter keeps). Exit codes:
    0 kept, 1 the API or the database failed, 2 bad usage, 3 authentication failed."""
    from secfindings.tickets import from_client, save  # noqa: PLC0415 - loads only for this command
    from secfindings.tickets._source import check_synced, copy_filter  # noqa: PLC0415

    with errors():
        check_synced(dest)  # before the walk: a misspelt DEST costs no request and makes no file
        with client_from_env() as client:
            found = from_client(client, filters=copy_filter(dest))  # the copy's findings only
        rows = save(found, dest)
    click.echo(f"kept {rows} tickets of {len(found)} findings in {dest}", err=True)


@tickets_group.command("drift")
@click.argument("source")
@click.option("--jira", "jira_url", metavar="URL", is_flag=False, flag_value="",
              help="A Jira Cloud site (https://acme.atlassian.net); alone, the profile's jira_url. "
              "Credentials: $JIRA_EMAIL and $JIRA_API_TOKEN, or the profile's.")  # fmt: skip
@click.option("--project", help="Jira: only keys of this project (SEC); default the profile's jira_project.")
@click.option("--github", "github_repo", metavar="OWNER/REPO", is_flag=False, flag_value="",
              help="GitHub issues of a repository; alone, the profile's github_repo. Token: "
              "$GITHUB_TOKEN (or $GH_TOKEN), or the profile's.")  # fmt: skip
@click.option(
    "--github-api",
    metavar="URL",
    help="GitHub's API URL (default: the profile's github_api, else https://api.github.com).",
)
@click.option(
    "--close-fixed",
    is_flag=True,
    help="Close the open tickets of fixed findings (with a comment naming the finding).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def drift_command(
    source: str,
    jira_url: str | None,
    project: str | None,
    github_repo: str | None,
    github_api: str | None,
    close_fixed: bool,
    fmt: str,
) -> None:
    """Report fixed findings whose tickets are open, closed tickets whose findings are open,
    findings in a queue without a ticket, findings with two open tickets, and open tickets whose
    finding no longer exists. SOURCE is 'live' (the API, as every command is configured) or a
    synced destination with a finding_tickets table. The ticket system and its token: a flag >
    the environment > the profile (-p NAME's is a flag). Read-only unless --close-fixed, which
    closes tickets of fixed findings and never reopens one. Exit codes: 0 compared, 1 the API or
    a ticket system failed, 2 bad usage, 3 authentication failed."""
    from secfindings.profiles import FLAG_PROFILE  # noqa: PLC0415 - loads only for this command
    from secfindings.tickets import drift  # noqa: PLC0415
    from secfindings.tickets._credentials import resolve_tickets  # noqa: PLC0415

    with errors():
        settings = resolve_tickets(
            jira=jira_url,
            github=github_repo,
            project=project,
            github_api=github_api,
            flag_profile=FLAG_PROFILE.get(),
        )
        system = settings.make()
        if source == "live":
            with client_from_env() as client:
                report = drift(client, system, close_fixed=close_fixed)
        else:
            report = drift(source, system, close_fixed=close_fixed)
    emit(report.json() if fmt == "json" else report.text(), nl=False)
