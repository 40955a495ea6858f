"""Apply: the plan's mutations one by one, in order, each written to a journal before it is sent
and after its outcome is known.

A change counts only after a 2xx answer without GraphQL errors whose ``ok`` is true, or a read
that shows it made. A mutation that may have reached the server (a broken connection, a 5xx, a
timeout, an answer of ``ok: true`` beside GraphQL errors) is never sent again:
the client does not retry it, and neither does this loop; the object is read back instead, and
the run goes on only when the read shows the change made. Otherwise it stops, and a rerun plans
afresh from what the server holds then: the name of an object is its key, so an object the lost
answer did create is found and not created twice."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from secfindings._plain import plural
from secfindings.errors import GraphQLError, RateLimitError, SecFindingsError, ValidationError
from secfindings.rules._doc import dump_desired
from secfindings.rules._live import read
from secfindings.rules._model import (
    _FC_JSON,
    _FC_LISTS,
    _FC_REFS,
    BY_KEY,
    HIERARCHY,
    Executor,
    Field,
    Kind,
    RulesError,
    json_text,
    targets,
)
from secfindings.rules._plan import Action, Plan

#: GraphQL types of the flat mutations' arguments.
_FLAT_TYPES = {
    "name": "String",
    "description": "String",
    "scope_ids": "[ID]",
    "users": "[String]",
    "filters_config": "FiltersConfigInput",
    "priority": "Int",
}


class ApplyError(SecFindingsError):
    """``apply`` stopped before the end of the plan: the server refused a change, or a
    mutation's outcome was lost and the read-back did not show it made. :attr:`result` holds what
    was done; rerun ``apply`` (with the same journal) to finish."""

    def __init__(self, message: str, result: ApplyResult) -> None:
        super().__init__(message)
        self.result = result


@dataclass
class ApplyResult:
    """What a run of ``apply`` did."""

    plan: Plan
    #: Actions whose change the server made (answered, or read back after a lost answer).
    done: list[Action] = field(default_factory=list)
    #: (action, True when the read showed the change made) for every lost answer.
    read_back: list[tuple[Action, bool]] = field(default_factory=list)
    #: Steps a previous run left unconfirmed in the journal (its records).
    previous: list[dict[str, Any]] = field(default_factory=list)
    #: Mutations sent by this run.
    mutations: int = 0
    #: Requests of this run: the plan's reads, the mutations and the read-backs.
    requests: int = 0

    @property
    def complete(self) -> bool:
        """Whether every action of the plan was done."""
        return len(self.done) == len(self.plan.actions)

    def to_dict(self) -> dict[str, Any]:
        """The run as JSON-ready data (``rules apply --format json``)."""
        return {
            "complete": self.complete,
            "done": [a.to_dict() for a in self.done],
            "read_back": [{"action": a.to_dict(), "applied": ok} for a, ok in self.read_back],
            "previous_unconfirmed": self.previous,
            "mutations": self.mutations,
            "requests": self.requests,
        }

    def to_text(self) -> str:
        """The run as ``rules apply`` prints it."""
        lines = []
        if self.previous:
            n = plural(len(self.previous), "step")
            lines.append(f"the previous run left {n} unconfirmed; planned afresh from the server")
        lines.extend(f"done: {a.title()}" for a in self.done)
        for a, ok in self.read_back:
            lines.append(f"answer lost, read back: {a.title()}: {'made' if ok else 'not made'}")
        if not self.plan.actions:
            lines.append("No changes: the server matches the file.")
        else:
            sent = f"{plural(self.mutations, 'mutation')}, {plural(self.requests, 'request')}"
            lines.append(f"Applied {len(self.done)} of {plural(len(self.plan.actions), 'change')} ({sent}).")
        return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ the journal


class Journal:
    """A JSON-lines file: a record before each mutation is sent and one when its outcome is known.
    Removed when a run completes; what an interrupted run left is read by the next one."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path is not None else None

    def previous(self) -> list[dict[str, Any]]:
        """The steps of an earlier, unfinished run whose outcome it never recorded."""
        if self.path is None or not self.path.exists():
            return []
        last: dict[int, dict[str, Any]] = {}
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line cut by a crash
            if isinstance(rec, dict) and isinstance(rec.get("step"), int):
                last[rec["step"]] = rec
        return [r for r in last.values() if r.get("state") in ("sending", "unknown", "not applied")]

    def start(self, plan: Plan) -> None:
        """Begins a run's journal (the file's digest and the number of steps)."""
        if self.path is None:
            return
        digest = hashlib.sha256(dump_desired(plan.desired).encode()).hexdigest()
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        with self._open(os.O_TRUNC) as f:
            f.write(json.dumps({"run": now, "file_sha256": digest, "steps": len(plan.actions)}) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def write(self, step: int, action: Action, state: str, **extra: Any) -> None:
        """Records a step's state (``sending``, ``done``, ``unknown``, ...), flushed to disk."""
        if self.path is None:
            return
        rec = {
            "step": step,
            "op": action.op,
            "kind": action.kind,
            "name": action.name,
            "state": state,
            **extra,
        }
        with self._open(os.O_APPEND) as f:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _open(self, how: int) -> IO[str]:
        """The journal for writing, never through a link (one planted where the journal goes,
        beside a rules file in a shared checkout, had the run truncate the file it names)."""
        assert self.path is not None
        flags = os.O_WRONLY | os.O_CREAT | how | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(self.path, flags, 0o600)
        except OSError as exc:
            link = " (it is a link)" if self.path.is_symlink() else ""
            raise RulesError(f"cannot write the journal {self.path}{link}: {exc.strerror}") from None
        return os.fdopen(fd, "w", encoding="utf-8")

    def finish(self) -> None:
        """Removes the journal: the run completed."""
        if self.path is not None:
            self.path.unlink(missing_ok=True)


# ------------------------------------------------------------------------------ mutations


def _value(f: Field, v: Any, ids: Mapping[str, Mapping[str, str]]) -> Any:
    if f.type == "str":
        return "" if v is None else v  # the API keeps a field an edit sends as null
    if f.type == "json":
        return None if v is None else json_text(v)
    if f.type == "ref":
        return None if v is None else _id(ids, f.ref, v)
    if f.type == "refset":
        return [_id(ids, f.ref, n) for n in v or []]
    if f.type == "strset":
        return list(v or [])
    if f.type == "filters_config":
        return _filters_config(v or {}, ids)
    return v


def _filters_config(fc: Mapping[str, Any], ids: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in _FC_JSON:
        if key in fc:
            out[key] = json_text(fc[key])
    for key, (api, target) in _FC_REFS.items():
        if key in fc:
            name = fc[key]
            out[api] = _id(ids, target, name)
    for key in _FC_LISTS:
        if key in fc:
            out[key] = list(fc[key])
    return out


def _id(ids: Mapping[str, Mapping[str, str]], kind: str, name: str) -> str:
    """The id of the object a reference names (a saved filter may be a scope)."""
    for k in targets(kind):
        found = ids.get(k, {}).get(name)
        if found is not None:
            return found
    raise RulesError(f"no id known for the {BY_KEY[kind].label} {name!r}: rerun apply")


def _fields(spec: Kind, values: Mapping[str, Any], ids: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    return {spec.field(k).api_name: _value(spec.field(k), v, ids) for k, v in values.items()}


def mutation(action: Action, ids: Mapping[str, Mapping[str, str]]) -> tuple[str, str, dict[str, Any]]:
    """The document, its mutation field and its variables for one action."""
    if action.op == "save":
        return "mutation RulesApply { save_scope_hierarchy { ok } }", "save_scope_hierarchy", {}
    spec = BY_KEY[action.kind]
    if action.op == "delete":
        doc = f"mutation RulesApply($id: ID!) {{ {spec.delete}(id: $id) {{ ok }} }}"
        return doc, spec.delete, {"id": action.id}
    if action.op in ("enable", "disable"):
        assert spec.flag is not None
        _f, name, arg = spec.flag
        doc = f"mutation RulesApply($id: ID!, $on: Boolean!) {{ {name}(id: $id, {arg}: $on) {{ ok }} }}"
        return doc, name, {"id": action.id, "on": action.op == "enable"}
    create = action.op == "create"
    name = spec.create if create else spec.update
    how = spec.create_input if create else spec.update_input
    values = _fields(spec, action.fields, ids)
    values = {"name": action.name, **values} if create else values
    select = f"{{ ok {spec.result} {{ id }} }}"
    head = [] if create else ["$id: ID!"]
    args = [] if create else ["id: $id"]
    variables: dict[str, Any] = {} if create else {"id": action.id}
    if how == "flat":
        for k, v in values.items():
            head.append(f"${k}: {_FLAT_TYPES[k]}{'!' if create and k == 'name' else ''}")
            args.append(f"{k}: ${k}")
            variables[k] = v
    else:
        head.append(f"$input: {spec.input_type}!")
        args.append(f"{how}: $input")
        variables["input"] = values
    doc = f"mutation RulesApply({', '.join(head)}) {{ {name}({', '.join(args)}) {select} }}"
    return doc, name, variables


# ------------------------------------------------------------------------------ the run


def _ids(plan: Plan) -> dict[str, dict[str, str]]:
    return {k: {n: o.id for n, o in objs.items()} for k, objs in plan.live.objects.items()} | {
        k: {} for k in BY_KEY if k not in plan.live.objects
    }


def _made(client: Executor, action: Action, result: ApplyResult) -> tuple[bool, str | None]:
    """Reads the object back: was the action's change made? (and the object's id)."""
    kinds = [HIERARCHY] if action.op == "save" else [action.kind]
    live = read(client, kinds)
    result.requests += live.requests
    if action.op == "save":
        return live.hierarchy == action.fields.get("structure"), None
    if action.op == "delete":
        return action.id not in live.names.get(action.kind, {}), None
    if action.name in live.duplicates.get(action.kind, {}):
        n = len(live.duplicates[action.kind][action.name])
        raise RulesError(f"after a lost answer, {n} {action.label}s are named {action.name!r} on the server")
    obj = live.objects.get(action.kind, {}).get(action.name)
    if obj is None:
        return False, None
    if action.op == "create":
        want = action.fields
        return all(obj.canon.get(k) == v for k, v in want.items()), obj.id
    return all(obj.canon.get(c.field) == c.after for c in action.changes), obj.id


def run(
    client: Executor,
    plan: Plan,
    journal: str | os.PathLike[str] | None = None,
    *,
    on_step: Callable[[Action], None] | None = None,
) -> ApplyResult:
    """Runs the plan's actions in order (see the module's documentation)."""
    if plan.unsupported:
        a = plan.unsupported[0]
        more = f" (and {len(plan.unsupported) - 1} more)" if len(plan.unsupported) > 1 else ""
        raise RulesError(f"{a.title()}: {a.reason}{more}; nothing was sent")
    log = Journal(journal)
    result = ApplyResult(plan, previous=log.previous(), requests=plan.live.requests)
    if not plan.actions:
        log.finish()
        return result
    log.start(plan)
    ids = _ids(plan)
    step = -1
    for planned in plan.actions:
        for action in _sends(planned):
            step += 1
            _send(client, log, step, action, ids, result)
        result.done.append(planned)
        if on_step is not None:
            on_step(planned)
    log.finish()
    return result


def _sends(action: Action) -> list[Action]:
    """The mutations of one action: a replace is a delete, then a create."""
    if action.op != "replace":
        return [action]
    return [
        Action("delete", action.kind, action.name, action.id),
        Action("create", action.kind, action.name, fields=action.fields),
    ]


def _send(
    client: Executor,
    log: Journal,
    step: int,
    action: Action,
    ids: dict[str, dict[str, str]],
    result: ApplyResult,
) -> None:
    """One mutation, journaled; its outcome read back when the answer is lost."""
    doc, name, variables = mutation(action, ids)
    log.write(step, action, "sending")
    result.mutations += 1
    result.requests += 1
    try:
        data = client.execute(doc, variables)
    except ValidationError as exc:  # checked before sending: nothing went out
        log.write(step, action, "not sent", error=str(exc))
        raise ApplyError(f"{action.title()}: not sent: {exc}", result) from exc
    except (GraphQLError, RateLimitError) as exc:
        mixed = isinstance(exc, GraphQLError) and ((exc.data or {}).get(name) or {}).get("ok") is True
        if not mixed:
            log.write(step, action, "refused", error=str(exc))
            raise ApplyError(f"{action.title()}: the server refused it: {exc}", result) from exc
        # ok: true beside errors: whether the change was made is read, as after a lost answer
        # (it was: the journal said 'refused' and the message that nothing changed)
        _read_back(client, log, step, action, result, exc, ids)
        return
    except SecFindingsError as exc:
        _read_back(client, log, step, action, result, exc, ids)
        return
    else:
        answer = data.get(name) or {}
        if answer.get("ok") is not True:
            log.write(step, action, "refused", error="ok is not true")
            raise ApplyError(f"{action.title()}: the server answered ok: {answer.get('ok')!r}", result)
        obj = answer.get(BY_KEY[action.kind].result) if action.kind in BY_KEY else None
        new_id = obj.get("id") if isinstance(obj, Mapping) else None
        if action.op == "create" and new_id is None:  # an answer without the new object: read it
            made, new_id = _made(client, action, result)
            if not made or new_id is None:
                log.write(step, action, "unknown", error="answered ok without the object, not found")
                raise ApplyError(
                    f"{action.title()}: answered ok, but the object is not on the server", result
                )
        log.write(step, action, "done", id=new_id)
    if action.op == "create" and new_id is not None:
        ids[action.kind][action.name] = str(new_id)


def _read_back(
    client: Executor,
    log: Journal,
    step: int,
    action: Action,
    result: ApplyResult,
    exc: SecFindingsError,
    ids: dict[str, dict[str, str]],
) -> None:
    """After an answer that does not say whether the change was made (lost, or ok: true beside
    errors): the object read back; the run goes on only when it shows the change."""
    log.write(step, action, "unknown", error=type(exc).__name__)
    try:
        made, new_id = _made(client, action, result)
    except SecFindingsError as read_exc:
        lost = f"the answer was lost ({type(exc).__name__})"
        why = f"{lost} and the read-back failed too ({type(read_exc).__name__}); rerun apply"
        raise ApplyError(f"{action.title()}: {why}", result) from exc
    result.read_back.append((action, made))
    if not made:
        log.write(step, action, "not applied")
        why = f"the answer was lost ({type(exc).__name__}: {exc}); the server does not show the change"
        raise ApplyError(f"{action.title()}: {why}; rerun apply to finish", result) from exc
    log.write(step, action, "done", id=new_id, read_back=True)
    if action.op == "create" and new_id is not None:
        ids[action.kind][action.name] = str(new_id)
