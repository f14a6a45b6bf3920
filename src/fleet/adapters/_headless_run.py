"""How a headless run is built: the launch record a worker keeps, the agent's command line
and environment, and the config a worker's own config dir or Codex home is seeded with. The
adapter (:mod:`fleet.adapters.headless`) acts on these; nothing here starts a process."""

from __future__ import annotations

from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import attrs
import cattrs

from fleet._files import read_prompt
from fleet._keys import parse_key_source
from fleet._launch import headless_claude_argv, headless_codex_argv
from fleet._permissions import CODEX_SANDBOX_OF, DEFAULT_MODE, PermissionPolicy
from fleet._supervisor import RunSpec

DEFAULT_PERMISSION_MODE: Final = DEFAULT_MODE
#: The variable a Codex endpoint worker's provider reads its key from.
CODEX_KEY_VAR: Final = "FLEET_ENDPOINT_API_KEY"

#: Never inherited by a worker: a parent agent session's identity, which would make the child
#: think it is nested in (or report to) the coordinator's own session.
_SESSION_VARS: Final = (
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_PROJECT_DIR",
    "CODEX_THREAD_ID",
    "CODEX_SESSION_ID",
)
#: Credentials and routing an endpoint worker must not inherit (clausona's list for API
#: profiles): only the worker's own key may reach its endpoint.
_CLAUDE_CREDENTIAL_VARS: Final = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "ANTHROPIC_CUSTOM_HEADERS",
    "ANTHROPIC_IDENTITY_TOKEN",
    "ANTHROPIC_IDENTITY_TOKEN_FILE",
    "ANTHROPIC_FEDERATION_RULE_ID",
    "ANTHROPIC_ORGANIZATION_ID",
    "ANTHROPIC_UNIX_SOCKET",
    "CLAUDE_CONFIG_DIR",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_REFRESH_TOKEN",
    "CLAUDE_CODE_API_KEY_FILE_DESCRIPTOR",
    "CLAUDE_CODE_OAUTH_TOKEN_FILE_DESCRIPTOR",
    "CLAUDE_CODE_WEBSOCKET_AUTH_FILE_DESCRIPTOR",
    "CLAUDE_CODE_API_KEY_HELPER_TTL_MS",
    "CLAUDE_CODE_HOST_AUTH_ENV_VAR",
    "CLAUDE_CODE_HOST_CREDS_FILE",
    "CLAUDE_CODE_SESSION_ACCESS_TOKEN",
    "CLAUDE_SESSION_INGRESS_TOKEN_FILE",
    "CLAUDE_BG_AUTH_SNAPSHOT_PATH",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_GATEWAY",
    "CLAUDE_CODE_USE_MANTLE",
    "CLAUDE_CODE_USE_FOUNDRY",
    "CLAUDE_CODE_USE_ANTHROPIC_AWS",
    "CLAUDE_CODE_USE_ANTHROPIC_GOOGLE_CLOUD",
    "CLAUDE_CODE_PROVIDER_MANAGED_BY_HOST",
    "CLAUDE_CODE_CUSTOM_OAUTH_URL",
)
_CODEX_CREDENTIAL_VARS: Final = (
    "CODEX_HOME",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "CODEX_API_KEY",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
)
#: An API worker talks to its endpoint and nowhere else.
_QUIET_CLAUDE: Final = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
}


@attrs.frozen(kw_only=True)
class LaunchRecord:
    """What a worker was launched with, kept for follow-ups and hand-overs. No secret in it."""

    worker: str
    tool: str
    worktree: str
    branch: str
    base: str | None = None
    brief: str | None = None
    profile: str | None = None
    model: str | None = None
    small_model: str | None = None
    permission_mode: str | None = None
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    add_dirs: tuple[str, ...] = ()
    codex_approval: str | None = None
    codex_network: bool = False
    effort: str | None = None
    endpoint: str | None = None
    key_from: str | None = None
    key_var: str | None = None
    config_dir: str | None = None
    timeout: float | None = None
    max_attempts: int = 4
    fallback_after: int = 1
    backoff_base: float = 2.0
    backoff_max: float = 60.0
    agent_retries: int | None = 0
    env: dict[str, str] = attrs.field(factory=dict)
    claude: str = "claude"
    codex: str = "codex"
    clausona: str | None = None
    grace: float = 5.0


record_converter = cattrs.Converter()


# -- building a run -------------------------------------------------------------------------


def build_run(
    record: LaunchRecord,
    *,
    home: Path,
    run: int,
    prompt: str,
    output_dir: Path,
    resume: str | None = None,
) -> RunSpec:
    """The :class:`RunSpec` of one run: argv (without the prompt), the environment changes,
    and the retry policy."""
    env_set: dict[str, str] = {"FLEET_WORKER": record.worker, "FLEET_HOME": str(home)}
    env_unset: list[str] = [*_SESSION_VARS, *key_source_vars(record)]
    key_vars: tuple[str, ...] = ()
    isolated = record.config_dir is not None
    if record.profile:
        # clausona sets the profile's config dir and, for API profiles, its endpoint and key.
        # It does not for the primary profile, and a subscription profile gets no credential:
        # none of the coordinator's own (its config dir, an API key in its environment) may
        # take the worker off the profile it was given.
        env_unset += _CLAUDE_CREDENTIAL_VARS if record.tool == "claude" else ("CODEX_HOME",)
    if record.tool == "claude":
        if record.agent_retries is not None:
            env_set["CLAUDE_CODE_MAX_RETRIES"] = str(record.agent_retries)
        if isolated:
            env_unset += _CLAUDE_CREDENTIAL_VARS
            env_set.update(_QUIET_CLAUDE)
            env_set["CLAUDE_CONFIG_DIR"] = str(record.config_dir)
            env_set["ANTHROPIC_BASE_URL"] = str(record.endpoint).rstrip("/")
            if record.model:
                for tier in ("OPUS", "SONNET"):
                    env_set[f"ANTHROPIC_DEFAULT_{tier}_MODEL"] = record.model
                small = record.small_model or record.model
                env_set["ANTHROPIC_DEFAULT_HAIKU_MODEL"] = small
                env_set["ANTHROPIC_SMALL_FAST_MODEL"] = small
            key_vars = (record.key_var or "ANTHROPIC_AUTH_TOKEN",)
        argv = _claude_argv(record, record.model, resume)
        fallback = (
            _claude_argv(record, record.small_model, resume)
            if record.small_model and record.small_model != record.model
            else None
        )
    else:
        if isolated:
            env_unset += _CODEX_CREDENTIAL_VARS
            env_set["CODEX_HOME"] = str(record.config_dir)
            key_vars = (record.key_var or CODEX_KEY_VAR,)
        argv = _codex_argv(record, record.model, resume)
        fallback = (
            _codex_argv(record, record.small_model, resume)
            if record.small_model and record.small_model != record.model
            else None
        )
    env_set.update(record.env)
    return RunSpec(
        worker=record.worker,
        home=str(home),
        tool=record.tool,
        run=run,
        cwd=record.worktree,
        argv=tuple(argv),
        prompt=prompt,
        fallback_argv=tuple(fallback) if fallback else None,
        env_set=env_set,
        env_unset=tuple(dict.fromkeys(v for v in env_unset if v not in env_set)),
        key_vars=key_vars,
        output_dir=str(output_dir),
        max_attempts=record.max_attempts,
        fallback_after=record.fallback_after,
        backoff_base=record.backoff_base,
        backoff_max=record.backoff_max,
        timeout=record.timeout,
        grace=record.grace,
    )


def _clausona(record: LaunchRecord) -> str:
    if not record.profile:
        return ""
    from fleet._profiles import clausona_binary

    return record.clausona or clausona_binary()


def launch_policy(record: LaunchRecord) -> PermissionPolicy:
    """The permission policy a worker was launched with, in its own tool's terms: for Codex,
    the recorded mode is its sandbox (a Claude mode given for either tool maps to the sandbox
    it means, anything else to workspace-write)."""
    if record.tool == "codex":
        sandbox = CODEX_SANDBOX_OF.get(record.permission_mode or DEFAULT_PERMISSION_MODE,
                                       "workspace-write")
        return PermissionPolicy(codex_sandbox=sandbox, codex_approval=record.codex_approval,
                                codex_network=record.codex_network, add_dirs=record.add_dirs)
    return PermissionPolicy(mode=record.permission_mode or DEFAULT_PERMISSION_MODE,
                            allowed_tools=record.allowed_tools,
                            disallowed_tools=record.disallowed_tools, add_dirs=record.add_dirs)


def config_rules(record: LaunchRecord) -> dict[str, list[str]]:
    """The policy's tool rules and directories as Claude Code reads them from a config dir's
    settings.json (``permissions``), beside the flags: a session resumed or opened there
    later by hand works under the same rules."""
    rules = {"allow": list(record.allowed_tools), "deny": list(record.disallowed_tools),
             "additionalDirectories": list(record.add_dirs)}
    return {key: value for key, value in rules.items() if value}


def _claude_argv(record: LaunchRecord, model: str | None, resume: str | None) -> list[str]:
    return headless_claude_argv(
        claude=record.claude, profile=record.profile, clausona=_clausona(record),
        policy=launch_policy(record), model=model, effort=record.effort, resume=resume,
    )


def _codex_argv(record: LaunchRecord, model: str | None, resume: str | None) -> list[str]:
    return headless_codex_argv(
        codex=record.codex, profile=record.profile, clausona=_clausona(record),
        policy=launch_policy(record), model=model, effort=record.effort, resume=resume,
    )


def codex_config(record: LaunchRecord, worktree: Path) -> str:
    """An endpoint worker's ``config.toml``: a provider for the endpoint whose key is read from
    an environment variable (``env_key``); no retries inside Codex (fleet retries)."""
    import tomlkit

    from fleet import _agent_config

    doc = tomlkit.document()
    if record.model:
        doc["model"] = record.model
    doc["model_provider"] = "fleet"
    policy = launch_policy(record)
    # The command line states both again (its -s and -c win); the file says the same, so a
    # person reading the worker's Codex home sees what it ran with.
    doc["approval_policy"] = policy.codex_approval or "never"
    doc["sandbox_mode"] = policy.codex_sandbox
    doc["check_for_update_on_startup"] = False
    if record.effort:
        doc["model_reasoning_effort"] = record.effort
    base = str(record.endpoint).rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    provider = tomlkit.table()
    provider["name"] = "fleet endpoint"
    provider["base_url"] = base
    provider["env_key"] = record.key_var or CODEX_KEY_VAR
    provider["wire_api"] = "responses"
    provider["request_max_retries"] = 0
    provider["stream_max_retries"] = 0
    providers = tomlkit.table(is_super_table=True)
    providers["fleet"] = provider
    doc["model_providers"] = providers
    _agent_config.codex_trust(doc, str(worktree), Path("config.toml"))
    return tomlkit.dumps(doc)


#: Hook events a supervised headless run does without: the supervisor journals how the run
#: ended (exit code, API status, limit, reset time) and retries overload itself, while these
#: would journal each failed attempt as stopped(api_error) or gone(ended) and wake a waiting
#: coordinator for a failure fleet is already retrying.
SUPERVISED_EVENTS_DROPPED: Final = ("StopFailure", "SessionEnd")


def drop_supervised_hooks(settings_file: Path) -> None:
    from fleet import _agent_config

    data, _ = _agent_config.read_json_object(settings_file)
    hooks = data.get("hooks")
    if isinstance(hooks, dict):
        for event in SUPERVISED_EVENTS_DROPPED:
            hooks.pop(event, None)
        _agent_config.write_json(settings_file, data, backup=False, fsync=False)


def default_key_var(tool: str, endpoint: str) -> str:
    if tool == "codex":
        return CODEX_KEY_VAR
    host = (urlsplit(endpoint).hostname or "").lower()
    # anthropic.com wants x-api-key; Anthropic-compatible gateways take a bearer token.
    if host == "anthropic.com" or host.endswith(".anthropic.com"):
        return "ANTHROPIC_API_KEY"
    return "ANTHROPIC_AUTH_TOKEN"


def key_source_vars(record: LaunchRecord) -> tuple[str, ...]:
    """The variable an ``env:NAME`` key source reads: no process but the agent gets the key,
    and the agent gets it under its own name only."""
    if record.key_from is None:
        return ()
    src = parse_key_source(record.key_from)
    return (src.ref,) if src.kind == "env" else ()


def brief_prompt(brief: Path) -> str:
    """The prompt a brief file gives an agent; refuses one no agent could be given."""
    text = read_prompt(brief, "brief")
    # A prompt starting with '-' would be read as an option.
    return "\n" + text if text.lstrip().startswith("-") else text


def trust_claude(config: Path, worktree: Path) -> None:
    from fleet import _agent_config

    _agent_config.trust_claude_project(
        config / ".claude.json", str(worktree), backup=False, fsync=False
    )


def trust_codex(config: Path, worktree: Path) -> None:
    from fleet import _agent_config

    _agent_config.trust_codex_project(
        config / "config.toml", str(worktree), backup=False, fsync=False
    )


