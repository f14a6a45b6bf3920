"""The coordinator's verbs for starting workers, and the TASKS.toml fan-out: what to start,
where, on which profile, in which order, and what to take back when a start fails.

This module decides; the adapters only act on their host and journal through the port they
are handed: :class:`~fleet.adapters.headless.HeadlessAdapter` (the worktree, the config dir,
the supervisor) through :func:`start_worker`, and any adapter, the apps (Superset, herdr)
first, through :func:`start_app_worker`.
Waiting goes through the watcher (:mod:`fleet._watch`): a start that must let another worker of
its profile settle first sleeps until that worker's journal changes, never on a timer.
"""

from fleet._orchestrate._apps import (
    APP_ADAPTERS,
    app_adapter,
    profile_label,
    run_app_tasks,
    start_app_worker,
    workspace_label,
)
from fleet._orchestrate._deliver import Delivery, hand_over, send_follow_up
from fleet._orchestrate._fanout import FanOutResult, Launch, plan_launches, run_tasks
from fleet._orchestrate._receipts import Receipt, own_receipt, receipt_of, wait_receipt
from fleet._orchestrate._start import start_worker, stop_worker
from fleet._orchestrate._waits import wait_for_profile, wait_started

__all__ = [
    "APP_ADAPTERS",
    "Delivery",
    "FanOutResult",
    "Launch",
    "Receipt",
    "app_adapter",
    "hand_over",
    "own_receipt",
    "plan_launches",
    "profile_label",
    "receipt_of",
    "run_app_tasks",
    "run_tasks",
    "send_follow_up",
    "start_app_worker",
    "start_worker",
    "stop_worker",
    "wait_for_profile",
    "wait_receipt",
    "wait_started",
    "workspace_label",
]
